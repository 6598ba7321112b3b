#include "troupe/net/http_client.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <curl/curl.h>

#include "troupe/net/redaction.hpp"

namespace troupe::net {

using std::chrono::steady_clock;

namespace {

// libcurl's codes are mapped to troupe's once, here.
error curl_error(CURLcode code, const char* detail) {
  std::string message = curl_easy_strerror(code);
  if (detail != nullptr && detail[0] != '\0') {
    message += ": ";
    message += detail;
  }
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
      return {errc::timeout, std::move(message)};
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_WEIRD_SERVER_REPLY:
      return {errc::unavailable, std::move(message)};
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
      return {errc::invalid_argument, std::move(message)};
    case CURLE_PEER_FAILED_VERIFICATION:
      return {errc::permission_denied, std::move(message)};
    default:
      return {errc::io_error, std::move(message)};
  }
}

long millis(std::chrono::milliseconds ms) {
  return static_cast<long>(ms.count());
}

// TROUPE_CURL_VERBOSE's output, in curl's own shape ("* " text, "> " sent and "< "
// received header lines) but with credentials redacted: curl's built-in verbose
// printer shows Authorization and x-api-key values as they are. Bodies are not shown
// (as curl does not), so prompts and answers stay out of the log too.
int on_curl_debug(CURL*, curl_infotype type, char* data, size_t size, void*) {
  std::string_view mark;
  switch (type) {
    case CURLINFO_TEXT:
      mark = "* ";
      break;
    case CURLINFO_HEADER_OUT:
      mark = "> ";
      break;
    case CURLINFO_HEADER_IN:
      mark = "< ";
      break;
    default:
      return 0;
  }
  const auto text = redact_headers(std::string_view(data, size));
  std::string out;
  out.reserve(text.size() + 16);
  std::string_view rest = text;
  while (!rest.empty()) {
    const auto newline = rest.find('\n');
    const auto line = newline == std::string_view::npos ? rest : rest.substr(0, newline + 1);
    rest.remove_prefix(line.size());
    out += mark;
    out += line;
    if (line.back() != '\n') {
      out += '\n';
    }
  }
  // One write per call: stdio locks the stream, so lines of concurrent transfers do not
  // interleave mid-line.
  std::fwrite(out.data(), 1, out.size(), stderr);
  return 0;
}

} // namespace

std::string_view http_client_response::header(std::string_view name) const noexcept {
  for (const auto& h : headers) {
    if (iequals(h.name, name)) {
      return h.value;
    }
  }
  return {};
}

namespace detail {

struct curl_engine;

/// One request in flight.
struct transfer {
  explicit transfer(std::shared_ptr<curl_engine> owner, asio::any_io_executor ex)
      : engine(std::move(owner)), signal(ex) {}
  ~transfer();

  std::shared_ptr<curl_engine> engine;
  // From the engine's pool of easy handles, returned to it (reset) when the transfer ends.
  CURL* easy = nullptr;
  curl_slist* header_list = nullptr;
  curl_slist* resolve_list = nullptr;
  std::string request_body;
  std::shared_ptr<const std::string> shared_body;
  http_deadlines deadlines;
  char error_buffer[CURL_ERROR_SIZE] = {};

  unsigned status = 0;
  std::vector<http_header> headers;
  bool head_done = false;

  std::string buffer;
  std::size_t received = 0;
  bool got_body = false;
  bool paused = false;
  bool live = false; // in the multi handle
  bool done = false;
  std::optional<error> failure;
  steady_clock::time_point started = steady_clock::now();
  steady_clock::time_point last_data;

  // Wakes the consumer: cancelled by producers, expires at the consumer's deadline.
  asio::steady_timer signal;
  bool notified = false;

  void notify() {
    notified = true;
    signal.cancel();
  }
};

/// The multi handle and Asio's watch over curl's sockets and timer.
struct curl_engine : std::enable_shared_from_this<curl_engine> {
  struct socket_watch {
    socket_watch(asio::any_io_executor ex, curl_socket_t fd) : descriptor(ex, fd), socket(fd) {}
    asio::posix::stream_descriptor descriptor;
    curl_socket_t socket;
    int wanted = 0;
    bool reading = false;
    bool writing = false;
    bool removed = false;
  };

  curl_engine(asio::any_io_executor ex, http_client_options opts)
      : executor(std::move(ex)), options(std::move(opts)), timer(executor) {
    static std::once_flag global_init;
    std::call_once(global_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, &curl_engine::on_socket);
    curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, this);
    curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, &curl_engine::on_timer);
    curl_multi_setopt(multi, CURLMOPT_TIMERDATA, this);
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, options.max_cached_connections);
    if (options.max_host_connections > 0) {
      curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, options.max_host_connections);
    }
  }

  ~curl_engine() {
    shutdown();
  }

  asio::any_io_executor executor;
  http_client_options options;
  CURLM* multi = nullptr;
  asio::steady_timer timer;
  std::unordered_map<curl_socket_t, std::shared_ptr<socket_watch>> sockets;
  std::unordered_map<CURL*, std::shared_ptr<transfer>> live;
  // Easy handles of ended transfers, reset, for the next ones: an easy handle is a few
  // kilobytes allocated and initialised, and a model call would make one per request.
  // A transfer may be let go on another thread than the engine's, hence the lock.
  std::mutex idle_easy_mutex;
  std::vector<CURL*> idle_easy;
  bool idle_easy_closed = false;
  std::size_t connections_opened = 0;
  std::atomic<std::size_t> easy_handles_made{0};
  bool stopped = false;

  /// An easy handle with every option at its default: a pooled one, or a new one.
  CURL* take_easy() {
    {
      std::lock_guard lock(idle_easy_mutex);
      if (!idle_easy.empty()) {
        CURL* e = idle_easy.back();
        idle_easy.pop_back();
        return e;
      }
    }
    easy_handles_made.fetch_add(1, std::memory_order_relaxed);
    return curl_easy_init();
  }

  /// Takes back an ended transfer's easy handle (out of the multi handle), up to as many
  /// as the engine keeps connections; past that, or once shut down, it is freed.
  void give_back_easy(CURL* e) {
    const auto keep = static_cast<std::size_t>(std::max(1L, options.max_cached_connections));
    curl_easy_reset(e);
    {
      std::lock_guard lock(idle_easy_mutex);
      if (!idle_easy_closed && idle_easy.size() < keep) {
        idle_easy.push_back(e);
        return;
      }
    }
    curl_easy_cleanup(e);
  }

  // Removes every transfer (they fail as cancelled), stops watching and closes the multi
  // handle. Curl's callbacks are unhooked first: the engine may be going away inside the
  // io_context's own destructor, where no new wait may be started.
  void shutdown() {
    if (stopped) {
      return;
    }
    while (!live.empty()) {
      auto t = live.begin()->second;
      end(*t, error{errc::cancelled, "the HTTP client was shut down"});
    }
    stopped = true;
    curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, nullptr);
    curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, nullptr);
    timer.cancel();
    for (auto& [fd, watch] : sockets) {
      watch->removed = true;
      watch->descriptor.release();
    }
    sockets.clear();
    std::vector<CURL*> pooled;
    {
      std::lock_guard lock(idle_easy_mutex);
      idle_easy_closed = true;
      pooled.swap(idle_easy);
    }
    for (CURL* e : pooled) {
      curl_easy_cleanup(e);
    }
    curl_multi_cleanup(multi);
    multi = nullptr;
  }

  // Takes a transfer out of the multi handle and records how it ended.
  void end(transfer& t, std::optional<error> failure) {
    if (t.live) {
      t.live = false;
      curl_multi_remove_handle(multi, t.easy);
      long connects = 0;
      if (curl_easy_getinfo(t.easy, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK && connects > 0) {
        connections_opened += static_cast<std::size_t>(connects);
      }
      // Erase last: it may hold the last reference to `t`.
      t.done = true;
      if (failure && !t.failure) {
        t.failure = std::move(failure);
      }
      t.notify();
      live.erase(t.easy);
      return;
    }
    t.done = true;
    if (failure && !t.failure) {
      t.failure = std::move(failure);
    }
    t.notify();
  }

  void action(curl_socket_t fd, int events) {
    if (stopped) {
      return;
    }
    int running = 0;
    curl_multi_socket_action(multi, fd, events, &running);
    drain_done();
  }

  void drain_done() {
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi, &queued)) {
      if (msg->msg != CURLMSG_DONE) {
        continue;
      }
      const auto it = live.find(msg->easy_handle);
      if (it == live.end()) {
        continue;
      }
      auto t = it->second; // keep alive across end()
      const CURLcode code = msg->data.result;
      std::optional<error> failure;
      if (code != CURLE_OK) {
        failure = curl_error(code, t->error_buffer);
      }
      end(*t, std::move(failure));
    }
  }

  void arm(const std::shared_ptr<socket_watch>& w) {
    if (w->removed || stopped) {
      return;
    }
    auto self = shared_from_this();
    if ((w->wanted & CURL_POLL_IN) != 0 && !w->reading) {
      w->reading = true;
      w->descriptor.async_wait(asio::posix::stream_descriptor::wait_read,
                               [self, w](const boost::system::error_code& ec) {
                                 w->reading = false;
                                 if (w->removed || ec == asio::error::operation_aborted) {
                                   return;
                                 }
                                 self->action(w->socket, ec ? CURL_CSELECT_ERR : CURL_CSELECT_IN);
                                 self->arm(w);
                               });
    }
    if ((w->wanted & CURL_POLL_OUT) != 0 && !w->writing) {
      w->writing = true;
      w->descriptor.async_wait(asio::posix::stream_descriptor::wait_write,
                               [self, w](const boost::system::error_code& ec) {
                                 w->writing = false;
                                 if (w->removed || ec == asio::error::operation_aborted) {
                                   return;
                                 }
                                 self->action(w->socket, ec ? CURL_CSELECT_ERR : CURL_CSELECT_OUT);
                                 self->arm(w);
                               });
    }
  }

  static int on_socket(CURL*, curl_socket_t fd, int what, void* userp, void*) {
    auto* self = static_cast<curl_engine*>(userp);
    auto it = self->sockets.find(fd);
    if (what == CURL_POLL_REMOVE) {
      if (it != self->sockets.end()) {
        auto w = it->second;
        w->removed = true;
        // curl owns the descriptor and closes it: release, never close.
        w->descriptor.release();
        self->sockets.erase(it);
      }
      return 0;
    }
    if (it == self->sockets.end()) {
      it = self->sockets.emplace(fd, std::make_shared<socket_watch>(self->executor, fd)).first;
    }
    it->second->wanted = what;
    self->arm(it->second);
    return 0;
  }

  static int on_timer(CURLM*, long timeout_ms, void* userp) {
    auto* self = static_cast<curl_engine*>(userp);
    if (timeout_ms < 0) {
      self->timer.cancel();
      return 0;
    }
    if (timeout_ms == 0) {
      // "As soon as possible": a post, not a timer (no timer queue or timerfd update).
      self->timer.cancel();
      asio::post(self->executor, [weak = self->weak_from_this()] {
        if (auto engine = weak.lock()) {
          engine->action(CURL_SOCKET_TIMEOUT, 0);
        }
      });
      return 0;
    }
    self->timer.expires_after(std::chrono::milliseconds(timeout_ms));
    // Never call curl back from inside its callback: the wait completes later, even at 0.
    self->timer.async_wait([weak = self->weak_from_this()](const boost::system::error_code& ec) {
      if (ec) {
        return;
      }
      if (auto engine = weak.lock()) {
        engine->action(CURL_SOCKET_TIMEOUT, 0);
      }
    });
    return 0;
  }

  static size_t on_header(char* data, size_t size, size_t count, void* userp) {
    auto* t = static_cast<transfer*>(userp);
    const auto n = size * count;
    std::string_view line(data, n);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) {
      line.remove_suffix(1);
    }
    if (line.starts_with("HTTP/")) {
      t->headers.clear();
      const auto space = line.find(' ');
      if (space != std::string_view::npos && line.size() >= space + 4) {
        unsigned code = 0;
        for (std::size_t i = space + 1; i < space + 4; ++i) {
          code = code * 10 + static_cast<unsigned>(line[i] - '0');
        }
        t->status = code;
      }
    } else if (line.empty()) {
      if (t->status >= 200) {
        t->head_done = true;
        t->notify();
      }
    } else if (const auto colon = line.find(':'); colon != std::string_view::npos) {
      auto value = line.substr(colon + 1);
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
        value.remove_prefix(1);
      }
      t->headers.push_back({std::string(line.substr(0, colon)), std::string(value)});
    }
    return n;
  }

  static size_t on_write(char* data, size_t size, size_t count, void* userp) {
    auto* t = static_cast<transfer*>(userp);
    const auto n = size * count;
    if (t->buffer.size() >= t->engine->options.max_buffered_bytes) {
      // The consumer is behind: curl keeps these bytes and offers them again once
      // `read` resumes the transfer.
      t->paused = true;
      return CURL_WRITEFUNC_PAUSE;
    }
    t->buffer.append(data, n);
    t->received += n;
    t->got_body = true;
    t->last_data = steady_clock::now();
    t->notify();
    return n;
  }

  expected<std::shared_ptr<transfer>> start(http_client_request& request) {
    if (stopped) {
      return fail(errc::cancelled, "the HTTP client was shut down");
    }
    auto t = std::make_shared<transfer>(shared_from_this(), executor);
    t->easy = take_easy();
    if (t->easy == nullptr) {
      return fail(errc::io_error, "curl_easy_init failed");
    }
    t->deadlines = request.deadlines;
    t->request_body = std::move(request.body);
    t->shared_body = std::move(request.shared_body);
    CURL* e = t->easy;
    curl_easy_setopt(e, CURLOPT_URL, request.url.c_str());
    curl_easy_setopt(e, CURLOPT_PRIVATE, t.get());
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    if (std::getenv("TROUPE_CURL_VERBOSE") != nullptr) {
      curl_easy_setopt(e, CURLOPT_DEBUGFUNCTION, &on_curl_debug);
      curl_easy_setopt(e, CURLOPT_VERBOSE, 1L);
    }
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->error_buffer);
    curl_easy_setopt(e, CURLOPT_USERAGENT, options.user_agent.c_str());
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &curl_engine::on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t.get());
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &curl_engine::on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, t.get());
    if (request.deadlines.connect.count() > 0) {
      curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, millis(request.deadlines.connect));
    }
    if (request.deadlines.total.count() > 0) {
      curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, millis(request.deadlines.total));
    }
    switch (request.method) {
      case http_method::get:
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
        break;
      case http_method::head:
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
        break;
      case http_method::post:
        break;
      default:
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, std::string(to_string(request.method)).c_str());
        break;
    }
    if (request.method != http_method::get && request.method != http_method::head) {
      const std::string& body = t->shared_body ? *t->shared_body : t->request_body;
      curl_easy_setopt(e, CURLOPT_POSTFIELDS, body.data());
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    }
    // No "Expect: 100-continue" round trip before bodies.
    t->header_list = curl_slist_append(t->header_list, "Expect:");
    for (const auto& h : request.headers) {
      const auto line = h.name + ": " + h.value;
      t->header_list = curl_slist_append(t->header_list, line.c_str());
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->header_list);
    if (!request.resolve.empty()) {
      for (const auto& entry : request.resolve) {
        // '+': the entry times out like any DNS cache entry instead of staying forever.
        const auto line = entry.starts_with('+') ? entry : "+" + entry;
        t->resolve_list = curl_slist_append(t->resolve_list, line.c_str());
      }
      curl_easy_setopt(e, CURLOPT_RESOLVE, t->resolve_list);
    }
    const auto rc = curl_multi_add_handle(multi, e);
    if (rc != CURLM_OK) {
      return fail(errc::io_error, std::string("curl_multi_add_handle: ") + curl_multi_strerror(rc));
    }
    t->live = true;
    live.emplace(e, t);
    return t;
  }
};

transfer::~transfer() {
  // The handle first: a reset lets go of the header lists it points to.
  if (easy != nullptr) {
    engine->give_back_easy(easy);
  }
  if (header_list != nullptr) {
    curl_slist_free_all(header_list);
  }
  if (resolve_list != nullptr) {
    curl_slist_free_all(resolve_list);
  }
}

} // namespace detail

namespace {

enum class wake { notified, deadline, cancelled };

// Waits until a producer notifies `t`, `deadline` passes, or the awaiting coroutine is
// cancelled. Single-threaded: nothing can notify between the caller's check and the wait.
asio::awaitable<wake> wait_for(std::shared_ptr<detail::transfer> t,
                               steady_clock::time_point deadline) {
  t->notified = false;
  t->signal.expires_at(deadline);
  auto [ec] = co_await t->signal.async_wait(asio::as_tuple(asio::use_awaitable));
  if (!ec) {
    co_return wake::deadline;
  }
  co_return t->notified ? wake::notified : wake::cancelled;
}

steady_clock::time_point body_deadline(const detail::transfer& t) {
  auto deadline = steady_clock::time_point::max();
  if (!t.got_body) {
    if (t.deadlines.first_byte.count() > 0) {
      deadline = t.started + t.deadlines.first_byte;
    }
  } else if (t.deadlines.idle.count() > 0) {
    deadline = t.last_data + t.deadlines.idle;
  }
  return deadline;
}

error deadline_error(const detail::transfer& t) {
  if (!t.got_body) {
    return {errc::timeout, "no response within the first-byte deadline of " +
                               std::to_string(t.deadlines.first_byte.count()) + " ms"};
  }
  return {errc::timeout, "the response went silent for longer than the idle deadline of " +
                             std::to_string(t.deadlines.idle.count()) + " ms"};
}

} // namespace

// --- http_stream ----------------------------------------------------------------------------

http_stream::~http_stream() {
  cancel();
}

http_stream::http_stream(http_stream&& other) noexcept = default;

http_stream& http_stream::operator=(http_stream&& other) noexcept {
  if (this != &other) {
    cancel();
    transfer_ = std::move(other.transfer_);
  }
  return *this;
}

unsigned http_stream::status() const noexcept {
  return transfer_ ? transfer_->status : 0;
}

const std::vector<http_header>& http_stream::headers() const noexcept {
  static const std::vector<http_header> none;
  return transfer_ ? transfer_->headers : none;
}

std::string_view http_stream::header(std::string_view name) const noexcept {
  for (const auto& h : headers()) {
    if (iequals(h.name, name)) {
      return h.value;
    }
  }
  return {};
}

std::size_t http_stream::bytes_received() const noexcept {
  return transfer_ ? transfer_->received : 0;
}

std::string http_stream::remote_address() const {
  char* ip = nullptr;
  if (!transfer_ || transfer_->easy == nullptr ||
      curl_easy_getinfo(transfer_->easy, CURLINFO_PRIMARY_IP, &ip) != CURLE_OK || ip == nullptr) {
    return {};
  }
  return ip;
}

void http_stream::cancel() {
  if (transfer_ && !transfer_->done) {
    transfer_->engine->end(*transfer_, error{errc::cancelled, "the transfer was cancelled"});
  }
}

asio::awaitable<expected<bool>> http_stream::read(std::string& out) {
  auto t = transfer_;
  if (!t) {
    co_return fail(errc::invalid_argument, "read on an empty http_stream");
  }
  for (;;) {
    if (!t->buffer.empty()) {
      if (out.empty()) {
        out.swap(t->buffer);
      } else {
        out.append(t->buffer);
      }
      t->buffer.clear();
      if (t->paused && t->live) {
        t->paused = false;
        curl_easy_pause(t->easy, CURLPAUSE_CONT);
      }
      co_return true;
    }
    if (t->done) {
      if (t->failure) {
        co_return tl::unexpected(*t->failure);
      }
      co_return false;
    }
    const auto deadline = body_deadline(*t);
    const auto woke = co_await wait_for(t, deadline);
    if (woke == wake::deadline && !t->done && t->buffer.empty()) {
      t->engine->end(*t, deadline_error(*t));
    } else if (woke == wake::cancelled && !t->done) {
      t->engine->end(*t, error{errc::cancelled, "the read was cancelled"});
      co_return fail(errc::cancelled, "the read was cancelled");
    }
  }
}

// --- http_client ----------------------------------------------------------------------------

http_client::http_client(asio::any_io_executor executor, http_client_options options)
    : engine_(std::make_shared<detail::curl_engine>(std::move(executor), std::move(options))) {}

http_client::~http_client() {
  engine_->shutdown();
}

asio::any_io_executor http_client::get_executor() const {
  return engine_->executor;
}

std::size_t http_client::active_transfers() const noexcept {
  return engine_->live.size();
}

std::size_t http_client::connections_opened() const noexcept {
  return engine_->connections_opened;
}

std::size_t http_client::easy_handles_made() const noexcept {
  return engine_->easy_handles_made.load(std::memory_order_relaxed);
}

asio::awaitable<expected<http_stream>> http_client::open(http_client_request request) {
  auto started = engine_->start(request);
  if (!started) {
    co_return tl::unexpected(started.error());
  }
  auto t = std::move(*started);
  http_stream stream(t); // cancels the transfer if we leave early
  for (;;) {
    if (t->head_done) {
      co_return std::move(stream);
    }
    if (t->done) {
      co_return tl::unexpected(t->failure.value_or(
          error{errc::unavailable, "the server closed the connection without a response"}));
    }
    auto deadline = steady_clock::time_point::max();
    if (t->deadlines.first_byte.count() > 0) {
      deadline = t->started + t->deadlines.first_byte;
    }
    const auto woke = co_await wait_for(t, deadline);
    if (woke == wake::deadline && !t->head_done && !t->done) {
      t->engine->end(
          *t, error{errc::timeout, "no response head within the first-byte deadline of " +
                                       std::to_string(t->deadlines.first_byte.count()) + " ms"});
    } else if (woke == wake::cancelled && !t->head_done && !t->done) {
      co_return fail(errc::cancelled, "the request was cancelled");
    }
  }
}

asio::awaitable<expected<http_client_response>> http_client::fetch(http_client_request request) {
  auto opened = co_await open(std::move(request));
  if (!opened) {
    co_return tl::unexpected(opened.error());
  }
  http_client_response response;
  response.status = opened->status();
  response.headers = opened->headers();
  const auto limit = engine_->options.max_body_bytes;
  for (;;) {
    auto more = co_await opened->read(response.body);
    if (!more) {
      co_return tl::unexpected(more.error());
    }
    if (!*more) {
      break;
    }
    if (response.body.size() > limit) {
      co_return fail(errc::limit_exceeded,
                     "response body larger than " + std::to_string(limit) + " bytes");
    }
  }
  co_return response;
}

} // namespace troupe::net
