#include "troupe/net/mcp/http_transport.hpp"

#include <map>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>
#include <fmt/format.h>

#include "async_event.hpp"
#include "troupe/net/sse_parser.hpp"
#include "troupe/runtime/log.hpp"

namespace troupe::net::mcp {

namespace {

using std::chrono::steady_clock;

// The server's own stream: how long it may stay silent before it is reopened, and the
// longest wait between reconnections after failures.
constexpr auto listen_idle = std::chrono::minutes(5);
constexpr auto max_listen_backoff = std::chrono::seconds(30);
// Bytes of an error body quoted in an error message.
constexpr std::size_t quoted_body_bytes = 300;

bool has_media_type(std::string_view content_type, std::string_view type) {
  const auto semicolon = content_type.find(';');
  auto base = content_type.substr(0, semicolon);
  while (!base.empty() && base.back() == ' ') {
    base.remove_suffix(1);
  }
  return iequals(base, type);
}

std::chrono::milliseconds until(steady_clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady_clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

// How a stream of events ended.
struct stream_end {
  /// The answer to the request it was read for arrived.
  bool answered = false;
  /// The reader was cancelled (abandoned or closed).
  bool cancelled = false;
  /// At least one event arrived on this connection.
  bool got_event = false;
  /// Why it ended, when not at a clean end of the body.
  std::string why;
};

class http_transport final : public transport, public std::enable_shared_from_this<http_transport> {
public:
  http_transport(http_client& client, http_options options)
      : client_(client), options_(std::move(options)),
        log_(log::context{{"mcp_server", options_.name}}) {}

  asio::awaitable<expected<void>> start(std::weak_ptr<transport_events> events) override {
    events_ = std::move(events);
    if (!options_.url.starts_with("http://") && !options_.url.starts_with("https://")) {
      co_return fail(errc::invalid_argument,
                     fmt::format("MCP server '{}': url must be http:// or https://, not '{}'",
                                 options_.name, options_.url));
    }
    open_ = true;
    co_return expected<void>{};
  }

  asio::awaitable<expected<void>> send(std::string message, std::string request_id,
                                       steady_clock::time_point deadline) override {
    if (!open_) {
      co_return fail(errc::unavailable,
                     fmt::format("the connection to MCP server '{}' is closed", options_.name));
    }
    auto self = shared_from_this();
    http_client_request request;
    request.method = http_method::post;
    request.url = options_.url;
    request.headers = common_headers();
    request.headers.push_back({"Content-Type", "application/json"});
    request.headers.push_back({"Accept", "application/json, text/event-stream"});
    request.body = std::move(message);
    request.deadlines = deadlines(deadline);
    const bool had_session = !session_id_.empty();
    // Awaitables are named: GCC 12 destroys some temporaries of a co_await twice.
    auto opening = client_.open(std::move(request));
    auto opened = co_await std::move(opening);
    if (!opened) {
      co_return fail(opened.error().code, fmt::format("MCP server '{}' ({}): {}", options_.name,
                                                      options_.url, opened.error().message));
    }
    auto stream = std::move(*opened);
    if (const auto id = stream.header("Mcp-Session-Id"); !id.empty()) {
      session_id_ = std::string(id);
    }
    const auto status = stream.status();
    if (status == 202) {
      co_return expected<void>{};
    }
    const auto content_type = std::string(stream.header("Content-Type"));
    if (status == 404 && had_session) {
      session_id_.clear();
      co_return fail(errc::not_found,
                     fmt::format("MCP server '{}' no longer knows the session", options_.name));
    }
    if (status >= 200 && status < 300 && has_media_type(content_type, "text/event-stream")) {
      if (request_id.empty()) {
        co_return expected<void>{}; // nothing to wait for on it
      }
      auto signal = std::make_shared<asio::cancellation_signal>();
      readers_[request_id] = signal;
      asio::co_spawn(client_.get_executor(),
                     follow_response(self, std::move(stream), request_id, deadline, signal),
                     asio::bind_cancellation_slot(signal->slot(), asio::detached));
      co_return expected<void>{};
    }
    // A JSON body (the answer, or an error of the server's in JSON-RPC form).
    auto body = co_await read_body(stream);
    if (!body) {
      co_return tl::unexpected(body.error());
    }
    if (status >= 200 && status < 300 && (body->empty() || request_id.empty())) {
      // A notification or a response of ours should get 202 without a body; a server
      // that answers 200 with one (the conformance suite's initialize scenario answers
      // {"jsonrpc":"2.0","result":{}}) has nothing to say to it.
      if (!body->empty()) {
        log_.debug("MCP server '{}' answered a notification with a body; ignored", options_.name);
      }
      co_return expected<void>{};
    }
    auto parsed = parse_jsonrpc(*body);
    if (status >= 200 && status < 300) {
      if (!parsed) {
        co_return fail(errc::parse_error,
                       fmt::format("MCP server '{}' answered with a body that is not JSON-RPC: {}",
                                   options_.name, parsed.error().message));
      }
      deliver(std::move(*parsed));
      co_return expected<void>{};
    }
    // An HTTP error. A JSON-RPC error answering this request says best what went wrong.
    if (parsed && !request_id.empty()) {
      for (auto& m : *parsed) {
        if (m.kind == message_kind::error_response && m.id == request_id) {
          deliver(std::move(*parsed));
          co_return expected<void>{};
        }
      }
    }
    const auto code = status == 401 || status == 403 ? errc::permission_denied
                      : status >= 500                ? errc::unavailable
                                                     : errc::invalid_argument;
    co_return fail(code, fmt::format("MCP server '{}' answered HTTP {}: {}", options_.name, status,
                                     std::string_view(*body).substr(0, quoted_body_bytes)));
  }

  void set_protocol_version(std::string version) override {
    protocol_version_ = std::move(version);
  }

  void open_event_stream() override {
    if (!open_ || listening_) {
      return;
    }
    listening_ = true;
    listen_signal_ = std::make_shared<asio::cancellation_signal>();
    asio::co_spawn(client_.get_executor(), listen(shared_from_this(), listen_signal_),
                   asio::bind_cancellation_slot(listen_signal_->slot(), asio::detached));
  }

  void reset_session() override {
    session_id_.clear();
    protocol_version_.clear();
    stop_listening();
  }

  void abandon(const std::string& request_id) override {
    if (const auto it = readers_.find(request_id); it != readers_.end()) {
      it->second->emit(asio::cancellation_type::terminal);
      readers_.erase(it);
    }
  }

  asio::awaitable<void> close() override {
    auto self = shared_from_this();
    if (!open_) {
      co_return;
    }
    open_ = false;
    stop_listening();
    auto readers = std::move(readers_);
    for (auto& [id, signal] : readers) {
      signal->emit(asio::cancellation_type::terminal);
    }
    if (!session_id_.empty()) {
      // Ending the session is a courtesy: a server that does not answer in time, or
      // does not allow it (405), is left to expire it.
      http_client_request request;
      request.method = http_method::del;
      request.url = options_.url;
      request.headers = common_headers();
      request.deadlines = deadlines(steady_clock::now() + std::chrono::seconds(5));
      auto ending = client_.fetch(std::move(request));
      auto done = co_await std::move(ending);
      if (!done) {
        log_.debug("MCP server '{}': DELETE of the session failed: {}", options_.name,
                   done.error().message);
      }
      session_id_.clear();
    }
  }

  bool is_open() const noexcept override {
    return open_;
  }

  std::string describe() const override {
    return fmt::format("http: {}", options_.url);
  }

private:
  std::vector<http_header> common_headers() const {
    std::vector<http_header> headers = options_.headers;
    if (!session_id_.empty()) {
      headers.push_back({"Mcp-Session-Id", session_id_});
    }
    if (!protocol_version_.empty()) {
      headers.push_back({"MCP-Protocol-Version", protocol_version_});
    }
    return headers;
  }

  http_deadlines deadlines(steady_clock::time_point deadline) const {
    http_deadlines d;
    d.connect = std::min(options_.connect_timeout, until(deadline));
    d.first_byte = until(deadline);
    d.idle = until(deadline);
    d.total = until(deadline);
    return d;
  }

  void stop_listening() {
    if (listen_signal_) {
      listen_signal_->emit(asio::cancellation_type::terminal);
      listen_signal_.reset();
    }
    listening_ = false;
  }

  asio::awaitable<expected<std::string>> read_body(http_stream& stream) {
    std::string body;
    for (;;) {
      auto more = co_await stream.read(body);
      if (!more) {
        co_return fail(more.error().code, fmt::format("MCP server '{}': reading the answer: {}",
                                                      options_.name, more.error().message));
      }
      if (body.size() > options_.max_body_bytes) {
        co_return fail(errc::limit_exceeded,
                       fmt::format("MCP server '{}' sent a body over {} bytes", options_.name,
                                   options_.max_body_bytes));
      }
      if (!*more) {
        co_return body;
      }
    }
  }

  void deliver(std::vector<jsonrpc_message> messages) {
    for (auto& m : messages) {
      if (auto events = events_.lock()) {
        events->on_message(std::move(m));
      }
    }
  }

  void lost(const std::string& request_id, error why) {
    readers_.erase(request_id);
    if (auto events = events_.lock()) {
      events->on_request_lost(request_id, std::move(why));
    }
  }

  // Reads events from `stream` until its end, delivering messages; stops early once the
  // answer to `request_id` (when not empty) is delivered.
  asio::awaitable<stream_end> read_events(http_stream& stream, sse_parser& parser,
                                          std::string& last_id, std::string_view request_id) {
    stream_end end;
    std::string chunk;
    for (;;) {
      chunk.clear();
      auto more = co_await stream.read(chunk);
      if (!more) {
        end.cancelled = more.error().code == errc::cancelled;
        end.why = more.error().message;
        co_return end;
      }
      if (!chunk.empty()) {
        auto fed = parser.feed(chunk, [&](const sse_message& event) {
          end.got_event = true;
          if (event.data.empty() || (!event.event.empty() && event.event != "message")) {
            return true; // a priming event, or one that is not a JSON-RPC message
          }
          auto parsed = parse_jsonrpc(event.data);
          if (!parsed) {
            log_.warn("MCP server '{}' sent an SSE event that is not JSON-RPC: {}", options_.name,
                      parsed.error().message);
            return true;
          }
          for (const auto& m : *parsed) {
            if (!request_id.empty() && m.is_response() && m.id == request_id) {
              end.answered = true;
            }
          }
          deliver(std::move(*parsed));
          return !end.answered;
        });
        last_id = std::string(parser.last_event_id());
        if (!fed) {
          end.why = fed.error().message;
          co_return end;
        }
        if (end.answered) {
          stream.cancel();
          co_return end;
        }
      }
      if (!*more) {
        co_return end;
      }
    }
  }

  // GET on the endpoint for the server's stream, resuming after `last_id` when set.
  asio::awaitable<expected<http_stream>>
  open_get(std::string last_id, steady_clock::time_point deadline, bool listen_stream) {
    http_client_request request;
    request.method = http_method::get;
    request.url = options_.url;
    request.headers = common_headers();
    request.headers.push_back({"Accept", "text/event-stream"});
    if (!last_id.empty()) {
      request.headers.push_back({"Last-Event-ID", std::move(last_id)});
    }
    request.deadlines = deadlines(deadline);
    if (listen_stream) {
      request.deadlines.idle = listen_idle;
      request.deadlines.total = std::chrono::milliseconds(0);
      request.deadlines.first_byte = listen_idle;
    }
    auto opening = client_.open(std::move(request));
    auto opened = co_await std::move(opening);
    if (!opened) {
      co_return tl::unexpected(opened.error());
    }
    const auto status = opened->status();
    if (status == 404 && !session_id_.empty()) {
      co_return fail(errc::not_found,
                     fmt::format("MCP server '{}' no longer knows the session", options_.name));
    }
    if (status == 405 || (listen_stream && status >= 400 && status < 500)) {
      // 405 is how a server says it has no stream of its own; a server that refuses the
      // GET otherwise (400) is not asked again and again either.
      co_return fail(errc::not_found, fmt::format("MCP server '{}' offers no stream of its own "
                                                  "(HTTP {})",
                                                  options_.name, status));
    }
    if (status < 200 || status >= 300 ||
        !has_media_type(opened->header("Content-Type"), "text/event-stream")) {
      co_return fail(errc::unavailable,
                     fmt::format("MCP server '{}' answered the stream's GET "
                                 "with HTTP {} ({})",
                                 options_.name, status, opened->header("Content-Type")));
    }
    co_return std::move(*opened);
  }

  static asio::awaitable<bool> cancelled() {
    const auto state = co_await asio::this_coro::cancellation_state;
    co_return state.cancelled() != asio::cancellation_type::none;
  }

  // Reads the SSE answer of one request, resuming it after a cut (SEP-1699). `signal`
  // (whose slot the coroutine is bound to) lives as long as the coroutine.
  static asio::awaitable<void> follow_response(std::shared_ptr<http_transport> self,
                                               http_stream stream, std::string request_id,
                                               steady_clock::time_point deadline,
                                               std::shared_ptr<asio::cancellation_signal> signal) {
    (void)signal;
    co_await asio::this_coro::throw_if_cancelled(false);
    sse_parser parser;
    std::string last_id;
    unsigned attempts = 0;
    for (;;) {
      const auto end = co_await self->read_events(stream, parser, last_id, request_id);
      if (end.answered || end.cancelled || !self->open_ || co_await cancelled()) {
        self->readers_.erase(request_id);
        co_return;
      }
      if (end.got_event) {
        attempts = 0;
      }
      if (last_id.empty()) {
        self->lost(
            request_id,
            error{errc::unavailable,
                  fmt::format("MCP server '{}': the answer's stream ended before the "
                              "answer{}, and it cannot be resumed (no event id)",
                              self->options_.name, end.why.empty() ? "" : " (" + end.why + ")")});
        co_return;
      }
      if (++attempts > self->options_.max_resume_attempts) {
        self->lost(request_id, error{errc::unavailable,
                                     fmt::format("MCP server '{}': the answer's stream could not "
                                                 "be resumed after {} attempts",
                                                 self->options_.name, attempts - 1)});
        co_return;
      }
      // The server's retry delay, as the spec requires, before reconnecting.
      const auto wait = parser.retry_ms() ? std::chrono::milliseconds(*parser.retry_ms())
                                          : self->options_.default_retry;
      co_await detail::pause(wait);
      if (co_await cancelled() || !self->open_) {
        co_return;
      }
      if (steady_clock::now() >= deadline) {
        self->lost(request_id, error{errc::timeout,
                                     fmt::format("MCP server '{}': no answer before the deadline",
                                                 self->options_.name)});
        co_return;
      }
      self->log_.debug("MCP server '{}': resuming the answer's stream after event '{}'",
                       self->options_.name, last_id);
      auto reopening = self->open_get(last_id, deadline, false);
      auto reopened = co_await std::move(reopening);
      if (!reopened) {
        if (reopened.error().code == errc::cancelled) {
          co_return;
        }
        if (reopened.error().code == errc::not_found) {
          self->lost(request_id, reopened.error());
          co_return;
        }
        self->log_.debug("MCP server '{}': resuming failed: {}", self->options_.name,
                         reopened.error().message);
        continue;
      }
      stream = std::move(*reopened);
      parser = sse_parser();
    }
  }

  // The server's own stream, open until close; reconnected after its `retry` delay.
  static asio::awaitable<void> listen(std::shared_ptr<http_transport> self,
                                      std::shared_ptr<asio::cancellation_signal> signal) {
    (void)signal;
    co_await asio::this_coro::throw_if_cancelled(false);
    std::string last_id;
    std::optional<unsigned> retry;
    std::chrono::milliseconds backoff = self->options_.default_retry;
    while (self->open_ && !co_await cancelled()) {
      auto opening = self->open_get(last_id, steady_clock::now() + listen_idle, true);
      auto opened = co_await std::move(opening);
      if (!opened) {
        if (opened.error().code == errc::cancelled || opened.error().code == errc::not_found) {
          // Cancelled, a server without a stream of its own, or a session that is gone
          // (the next request finds out and starts a new one).
          co_return;
        }
        co_await detail::pause(backoff);
        backoff = std::min<std::chrono::milliseconds>(backoff * 2, max_listen_backoff);
        continue;
      }
      sse_parser parser;
      const auto end = co_await self->read_events(*opened, parser, last_id, {});
      if (parser.retry_ms()) {
        retry = parser.retry_ms();
      }
      if (end.cancelled) {
        co_return;
      }
      if (end.got_event) {
        backoff = self->options_.default_retry;
      }
      co_await detail::pause(retry ? std::chrono::milliseconds(*retry) : backoff);
    }
  }

  http_client& client_;
  http_options options_;
  log::context log_;
  std::weak_ptr<transport_events> events_;
  std::string session_id_;
  std::string protocol_version_;
  std::map<std::string, std::shared_ptr<asio::cancellation_signal>> readers_;
  std::shared_ptr<asio::cancellation_signal> listen_signal_;
  bool listening_ = false;
  bool open_ = false;
};

} // namespace

std::shared_ptr<transport> make_http_transport(http_client& client, http_options options) {
  return std::make_shared<http_transport>(client, std::move(options));
}

} // namespace troupe::net::mcp
