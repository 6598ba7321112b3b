#include "troupe/net/http_server.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <random>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include "http_connection.hpp"
#include "request_parser.hpp"

namespace troupe::net {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using namespace asio::experimental::awaitable_operators;
using std::chrono::steady_clock;

namespace detail {

void stream_state::report_disconnect() {
  gone.store(true);
  open.store(false);
  std::function<void()> callback;
  {
    std::lock_guard lock(callback_mutex);
    if (disconnect_reported) {
      return;
    }
    disconnect_reported = true;
    callback = std::move(on_disconnect);
  }
  if (callback) {
    callback();
  }
}

/// One acceptor and the executor its connections run on.
struct listener {
  listener(asio::any_io_executor exec, asio::io_context* strand_source, metric_counter& count)
      : executor(std::move(exec)), acceptor(executor), strands_of(strand_source), accepted(count) {}

  asio::any_io_executor executor;
  tcp::acceptor acceptor;
  /// A multi-threaded io_context (set here) gives each connection a strand of its own;
  /// a single-threaded executor (a shard, null here) runs its connections directly.
  asio::io_context* strands_of;
  /// `troupe_http_connections_total{shard="k"}`.
  metric_counter& accepted;
};

/// State shared by the acceptors, every connection and `http_server`.
struct server_state {
  server_state(std::vector<asio::any_io_executor> executors, asio::io_context* strand_source,
               router table, http_server_options opts, metrics_registry& registry)
      : routes(std::move(table)), options(std::move(opts)), metrics(registry),
        open_connections(
            registry.gauge("troupe_http_open_connections", "HTTP connections open now")),
        open_streams(
            registry.gauge("troupe_http_open_streams", "Streaming responses (SSE) open now")),
        request_prefix(fmt::format("{:08x}", std::random_device{}())) {
    listeners.reserve(executors.size());
    for (std::size_t i = 0; i < executors.size(); ++i) {
      listeners.push_back(std::make_unique<listener>(
          std::move(executors[i]), strand_source,
          registry.counter("troupe_http_connections_total",
                           "HTTP connections accepted, by the shard (acceptor) that took them",
                           {{"shard", std::to_string(i)}})));
    }
  }

  std::vector<std::unique_ptr<listener>> listeners;
  router routes;
  http_server_options options;
  // The owner's registry and the metrics in it exist only as long as the http_server:
  // connection coroutines may finish after it is gone (an idle keep-alive connection
  // ends when its peer closes it), so they touch metrics through `update_metrics` only.
  metrics_registry& metrics;
  metric_gauge& open_connections;
  metric_gauge& open_streams;
  std::mutex metrics_mutex;
  bool metrics_live = true;
  /// Connections open now (the gauge's value, kept here for `max_connections`).
  std::atomic<std::int64_t> connections_open{0};

  /// Runs `f` (which updates metrics) unless the http_server is gone.
  template <class F> void update_metrics(F f) {
    std::lock_guard lock(metrics_mutex);
    if (metrics_live) {
      f();
    }
  }

  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> next_connection_id{1};
  std::atomic<std::uint64_t> next_request_number{1};
  const std::string request_prefix;

  mutable std::mutex connections_mutex;
  std::unordered_map<std::uint64_t, std::weak_ptr<connection>> connections;

  std::string new_request_id() {
    return fmt::format("{}-{}", request_prefix, next_request_number.fetch_add(1));
  }

  void record(const std::string& route, http_method method, unsigned status, double seconds) {
    update_metrics([&] { record_now(route, method, status, seconds); });
  }

  void record_now(const std::string& route, http_method method, unsigned status, double seconds) {
    metrics
        .counter("troupe_http_requests_total", "HTTP requests answered, by route and status",
                 {{"route", route},
                  {"method", std::string(to_string(method))},
                  {"status", std::to_string(status)}})
        .add();
    metrics
        .histogram("troupe_http_request_duration_seconds",
                   "Time from a request's last byte to its response, by route", {{"route", route}})
        .observe(seconds);
  }
};

} // namespace detail

using detail::connection;
using detail::listener;
using detail::server_state;
using detail::stream_chunk;
using detail::stream_state;

// Queues an SSE ping unless the stream is over; defined with response_stream below.
stream_write_result response_stream_ping(const std::shared_ptr<stream_state>& state);

namespace {

// A request id from the client is echoed only when it is short and harmless.
bool acceptable_request_id(std::string_view id) {
  if (id.empty() || id.size() > 64) {
    return false;
  }
  for (const char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) {
      return false;
    }
  }
  return true;
}

std::string allow_header(const std::vector<http_method>& methods) {
  std::string out;
  for (auto m : methods) {
    if (!out.empty()) {
      out += ", ";
    }
    out += to_string(m);
  }
  return out;
}

// Waits out the request deadline: the server's, or a later one the handler asked for
// (`extend_deadline`). Once the handler has turned the response into a stream the
// deadline no longer applies, so it then waits until cancelled.
asio::awaitable<void> request_deadline(const request_context& ctx,
                                       std::chrono::milliseconds timeout) {
  asio::steady_timer timer(co_await asio::this_coro::executor, timeout);
  for (;;) {
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) {
      co_return;
    }
    if (ctx.streaming()) {
      timer.expires_at(steady_clock::time_point::max());
    } else if (ctx.deadline_extension() > steady_clock::now()) {
      timer.expires_at(ctx.deadline_extension());
    } else {
      co_return;
    }
  }
}

asio::awaitable<http_response> call_handler(const route_handler& handler, request_context& ctx) {
  try {
    co_return co_await handler(ctx);
  } catch (const std::exception& e) {
    ctx.log().error("handler failed: {}", e.what());
    co_return http_response::error(500, "internal",
                                   "the request failed inside troupe; see the server log");
  }
}

// Routes the request and runs its handler under the request deadline.
asio::awaitable<http_response> dispatch(server_state& server, request_context& ctx) {
  auto found = server.routes.find(ctx.request().method, ctx.request().path);
  if (found.handler == nullptr) {
    if (!found.allowed.empty()) {
      ctx.set_route("unmatched", {});
      auto r =
          http_response::error(405, "method_not_allowed",
                               fmt::format("{} is not allowed on {}",
                                           to_string(ctx.request().method), ctx.request().path));
      r.headers.push_back({"Allow", allow_header(found.allowed)});
      co_return r;
    }
    ctx.set_route("unmatched", {});
    co_return http_response::error(404, "not_found",
                                   fmt::format("no route for {}", ctx.request().path));
  }
  ctx.set_route(found.pattern, std::move(found.params));
  auto outcome = co_await (call_handler(*found.handler, ctx) ||
                           request_deadline(ctx, server.options.request_timeout));
  if (outcome.index() == 0) {
    co_return std::get<0>(std::move(outcome));
  }
  ctx.log().warn("request deadline of {} ms passed", server.options.request_timeout.count());
  co_return http_response::error(504, "timeout",
                                 fmt::format("no answer within the request deadline of {} ms",
                                             server.options.request_timeout.count()));
}

asio::awaitable<void> write_response(connection& conn, unsigned version, bool keep_alive,
                                     bool head_only, const std::string& request_id,
                                     http_response response, std::chrono::milliseconds timeout) {
  http::response<http::string_body> out{static_cast<http::status>(response.status), version};
  out.set(http::field::server, conn.server->options.server_name);
  out.set(http::field::content_type, response.content_type);
  out.set("X-Request-Id", request_id);
  for (auto& h : response.headers) {
    out.set(h.name, h.value);
  }
  out.keep_alive(keep_alive);
  out.body() = std::move(response.body);
  out.prepare_payload();
  if (head_only) {
    // HEAD: same headers, no body (Content-Length stays that of the body).
    http::response<http::empty_body> head{out.result(), version};
    for (const auto& field : out) {
      head.set(field.name_string(), field.value());
    }
    conn.stream.expires_after(timeout);
    co_await http::async_write(conn.stream, head, asio::as_tuple(asio::use_awaitable));
    co_return;
  }
  conn.stream.expires_after(timeout);
  co_await http::async_write(conn.stream, out, asio::as_tuple(asio::use_awaitable));
}

// Answers a request that could not be read (garbage, oversize) and closes.
asio::awaitable<void> write_early_error(connection& conn, unsigned status, std::string_view code,
                                        std::string message) {
  auto request_id = conn.server->new_request_id();
  log::context{{"request_id", request_id}}.debug("rejecting request: {}", message);
  conn.server->record("unmatched", http_method::other, status, 0.0);
  co_await write_response(conn, 11, false, false, request_id,
                          http_response::error(status, code, message),
                          conn.server->options.request_timeout);
}

// --- streaming responses ---------------------------------------------------------------

// Writes queued chunks until the producer finishes, the client goes, or the server stops.
asio::awaitable<void> pump_stream(std::shared_ptr<connection> conn,
                                  std::shared_ptr<stream_state> state,
                                  std::shared_ptr<steady_clock::time_point> write_started,
                                  std::shared_ptr<bool> ended_cleanly) {
  auto& socket = conn->stream.socket();
  std::string batch;
  for (;;) {
    if (state->finished.load() && !state->channel.ready()) {
      break;
    }
    auto [ec, chunk] = co_await state->channel.async_receive(asio::as_tuple(asio::use_awaitable));
    if (ec) {
      co_return; // closed by the disconnect watch or a forced stop
    }
    if (chunk.empty()) {
      if (state->finished.load() || state->aborted.load()) {
        break;
      }
      continue;
    }
    // Coalesce whatever else is already queued into the same chunk (the batch keeps its
    // capacity: no allocation per chunk, shared chunks are read in place).
    batch.assign(chunk.bytes());
    bool end_seen = false;
    for (int i = 0; i < 64 && state->channel.ready() && !end_seen; ++i) {
      state->channel.try_receive([&](error_code, stream_chunk more) {
        if (more.empty()) {
          end_seen = true;
        } else {
          batch += more.bytes();
        }
      });
    }
    if (state->aborted.load()) {
      break;
    }
    *write_started = steady_clock::now();
    auto [wec, n] = co_await asio::async_write(socket, http::make_chunk(asio::buffer(batch)),
                                               asio::as_tuple(asio::use_awaitable));
    *write_started = steady_clock::time_point::max();
    if (wec) {
      state->report_disconnect();
      co_return;
    }
    if (end_seen && (state->finished.load() || state->aborted.load())) {
      break;
    }
  }
  if (state->aborted.load()) {
    error_code ignored;
    socket.set_option(asio::socket_base::linger(true, 0), ignored);
    socket.close(ignored);
    co_return;
  }
  auto [last_ec, last_n] = co_await asio::async_write(socket, http::make_chunk_last(),
                                                      asio::as_tuple(asio::use_awaitable));
  *ended_cleanly = !last_ec;
}

// Completes when the client closes its side (or the socket fails). Bytes that arrive
// while the response streams are the start of the client's next request (pipelined):
// they are kept in `next_request` and the watch stops reading (the rest waits in the
// socket), so the connection can serve that request once the stream has ended.
asio::awaitable<void> watch_disconnect(std::shared_ptr<connection> conn,
                                       std::shared_ptr<stream_state> state,
                                       std::shared_ptr<std::string> next_request) {
  // Waits for readability without a buffer (an idle subscriber holds none), then takes
  // what arrived: the client's next request, or nothing at its close.
  auto& socket = conn->stream.socket();
  auto [ec] =
      co_await socket.async_wait(tcp::socket::wait_read, asio::as_tuple(asio::use_awaitable));
  if (ec == asio::error::operation_aborted) {
    co_return;
  }
  std::size_t n = 0;
  if (!ec) {
    std::size_t ready = socket.available(ec);
    if (!ec) {
      next_request->resize(std::clamp<std::size_t>(ready, 1, 64 * 1024));
      n = socket.read_some(asio::buffer(*next_request), ec);
    }
  }
  if (ec || n == 0) {
    next_request->clear();
    state->report_disconnect();
    state->channel.close();
    co_return;
  }
  next_request->resize(n);
  // Completing would end the stream: wait to be cancelled when it ends.
  asio::steady_timer until_stream_ends(co_await asio::this_coro::executor,
                                       steady_clock::time_point::max());
  co_await until_stream_ends.async_wait(asio::as_tuple(asio::use_awaitable));
}

// SSE pings, and the guard against a client that stopped reading: a write pending for
// longer than the request timeout ends the stream.
asio::awaitable<void> keep_stream_alive(std::shared_ptr<connection> conn,
                                        std::shared_ptr<stream_state> state,
                                        std::shared_ptr<steady_clock::time_point> write_started) {
  const auto& options = conn->server->options;
  const auto tick = state->sse ? options.sse_ping_interval : options.request_timeout;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    timer.expires_after(tick);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) {
      co_return;
    }
    if (*write_started != steady_clock::time_point::max() &&
        steady_clock::now() - *write_started > options.request_timeout) {
      state->report_disconnect();
      state->channel.close();
      error_code ignored;
      conn->stream.socket().close(ignored);
      co_return;
    }
    if (state->sse) {
      const auto result = response_stream_ping(state);
      if (result == stream_write_result::closed) {
        co_return;
      }
    }
  }
}

/// Streams the response; true when it ended cleanly (the last chunk written) so the
/// connection may serve another request, with the bytes of that request already read
/// (if any) in `next_request`.
asio::awaitable<bool> run_stream(std::shared_ptr<connection> conn,
                                 std::shared_ptr<stream_state> state, const std::string& request_id,
                                 bool keep_alive, std::string& next_request) {
  conn->state.store(connection::phase::streaming);
  auto* server = conn->server;
  server->update_metrics([server] { server->open_streams.add(1); });
  conn->stream.expires_never();

  http::response<http::empty_body> head{static_cast<http::status>(state->status), 11};
  head.set(http::field::server, server->options.server_name);
  head.set(http::field::content_type, state->content_type);
  head.set("X-Request-Id", request_id);
  for (const auto& h : state->headers) {
    head.set(h.name, h.value);
  }
  head.chunked(true);
  head.keep_alive(keep_alive);
  http::response_serializer<http::empty_body> serializer{head};
  auto [ec, n] = co_await http::async_write_header(conn->stream.socket(), serializer,
                                                   asio::as_tuple(asio::use_awaitable));
  auto ended_cleanly = std::make_shared<bool>(false);
  auto pipelined = std::make_shared<std::string>();
  if (ec) {
    state->report_disconnect();
    state->channel.close();
  } else {
    auto write_started =
        std::make_shared<steady_clock::time_point>(steady_clock::time_point::max());
    co_await (pump_stream(conn, state, write_started, ended_cleanly) ||
              watch_disconnect(conn, state, pipelined) ||
              keep_stream_alive(conn, state, write_started));
  }
  state->open.store(false);
  state->channel.close();
  server->update_metrics([server] { server->open_streams.add(-1); });
  next_request = std::move(*pipelined);
  co_return *ended_cleanly&& keep_alive && conn->stream.socket().is_open();
}

// --- one connection --------------------------------------------------------------------

bool is_quiet_close(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
         ec == beast::error::timeout || ec == asio::error::bad_descriptor ||
         ec == http::error::partial_message;
}

/// Takes `conn` out of the server's table and open-connection count, once.
void release(server_state& server, connection& conn) {
  if (conn.released.exchange(true)) {
    return;
  }
  // Uncounted before it leaves the table: a drain that sees the table empty may let the
  // server's owner (and its metrics) go at once.
  server.connections_open.fetch_sub(1);
  server.update_metrics([&server] { server.open_connections.add(-1); });
  std::lock_guard lock(server.connections_mutex);
  server.connections.erase(conn.id);
}

asio::awaitable<void> serve_connection(std::shared_ptr<server_state> server,
                                       std::shared_ptr<connection> conn) {
  const auto& options = server->options;
  beast::flat_buffer buffer;
  for (;;) {
    conn->state.store(connection::phase::idle);
    if (server->stopping.load()) {
      break;
    }
    detail::request_parser parser;
    detail::apply_limits(parser, {options.header_limit_bytes, options.body_limit_bytes});
    if (buffer.size() == 0) {
      // Wait for the first byte of the next request under the idle timeout. Until it
      // arrives the connection is idle, and a shutdown may close it; from then on the
      // request is in flight and is allowed to finish.
      conn->stream.expires_after(options.idle_timeout);
      auto [first_ec, first_n] = co_await conn->stream.async_read_some(
          buffer.prepare(4096), asio::as_tuple(asio::use_awaitable));
      if (first_ec) {
        break;
      }
      buffer.commit(first_n);
    }
    conn->state.store(connection::phase::busy);
    conn->stream.expires_after(options.request_timeout);
    auto [ec, n] = co_await http::async_read_header(conn->stream, buffer, parser,
                                                    asio::as_tuple(asio::use_awaitable));
    if (ec == http::error::body_limit) {
      co_await write_early_error(
          *conn, 413, "payload_too_large",
          fmt::format("the request body exceeds the limit of {} bytes", options.body_limit_bytes));
      break;
    }
    if (ec == http::error::header_limit ||
        (!ec && !detail::header_within_limit(parser.get(), options.header_limit_bytes))) {
      co_await write_early_error(
          *conn, 431, "headers_too_large",
          fmt::format("the request headers exceed {} bytes", options.header_limit_bytes));
      break;
    }
    if (ec == beast::error::timeout) {
      co_await write_early_error(*conn, 408, "request_timeout",
                                 "the request headers did not arrive within the deadline");
      break;
    }
    if (ec && is_quiet_close(ec)) {
      break;
    }
    if (ec) {
      co_await write_early_error(*conn, 400, "bad_request",
                                 fmt::format("malformed HTTP request: {}", ec.message()));
      break;
    }
    const auto start = steady_clock::now();
    if (!parser.is_done()) {
      if (beast::iequals(parser.get()[http::field::expect], "100-continue")) {
        http::response<http::empty_body> go_on{http::status::continue_, 11};
        conn->stream.expires_after(options.request_timeout);
        co_await http::async_write(conn->stream, go_on, asio::as_tuple(asio::use_awaitable));
      }
      conn->stream.expires_after(options.request_timeout);
      auto [body_ec, body_n] = co_await http::async_read(conn->stream, buffer, parser,
                                                         asio::as_tuple(asio::use_awaitable));
      if (body_ec == http::error::body_limit) {
        co_await write_early_error(*conn, 413, "payload_too_large",
                                   fmt::format("the request body exceeds the limit of {} bytes",
                                               options.body_limit_bytes));
        break;
      }
      if (body_ec == beast::error::timeout) {
        co_await write_early_error(*conn, 408, "request_timeout",
                                   "the request body did not arrive within the deadline");
        break;
      }
      if (body_ec) {
        if (!is_quiet_close(body_ec)) {
          co_await write_early_error(
              *conn, 400, "bad_request",
              fmt::format("malformed HTTP request body: {}", body_ec.message()));
        }
        break;
      }
    }
    auto raw = parser.release();
    const unsigned version = raw.version();
    const bool keep_alive = raw.keep_alive();
    const std::string_view given_id = raw["X-Request-Id"];
    std::string request_id =
        acceptable_request_id(given_id) ? std::string(given_id) : server->new_request_id();
    request_context ctx(detail::to_request(std::move(raw)), std::move(request_id), conn.get());
    const auto method = ctx.request().method;
    auto response = co_await dispatch(*server, ctx);

    if (ctx.streaming()) {
      if (buffer.size() == 0) {
        // A stream may last for hours: it keeps no read buffer meanwhile.
        buffer.shrink_to_fit();
      }
      server->record(ctx.route_pattern(), method, ctx.stream_state()->status,
                     std::chrono::duration<double>(steady_clock::now() - start).count());
      std::string next_request;
      const bool reusable = co_await run_stream(conn, ctx.stream_state(), ctx.request_id(),
                                                keep_alive && version >= 11, next_request);
      if (!reusable || server->stopping.load()) {
        break;
      }
      // The next request's first bytes, if the client sent them during the stream.
      auto room = buffer.prepare(next_request.size());
      asio::buffer_copy(room, asio::buffer(next_request));
      buffer.commit(next_request.size());
      continue;
    }
    const bool again = keep_alive && !server->stopping.load();
    const auto status = response.status;
    co_await write_response(*conn, version, again, method == http_method::head, ctx.request_id(),
                            std::move(response), options.request_timeout);
    const double seconds = std::chrono::duration<double>(steady_clock::now() - start).count();
    server->record(ctx.route_pattern(), method, status, seconds);
    ctx.log().debug("{} {} {} {:.3f}ms", to_string(method), ctx.request().path, status,
                    seconds * 1000.0);
    if (!again) {
      break;
    }
  }
  // Uncounted first: with several shards the client's next connection may be served on
  // another thread the moment it sees this one close.
  release(*server, *conn);
  error_code ignored;
  conn->stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  conn->stream.close();
}

asio::awaitable<void> serve_and_forget(std::shared_ptr<server_state> server,
                                       std::shared_ptr<connection> conn) {
  try {
    co_await serve_connection(server, conn);
  } catch (const std::exception& e) {
    log::error("connection {} failed: {}", conn->id, e.what());
  }
  release(*server, *conn);
}

asio::awaitable<void> accept_loop(std::shared_ptr<server_state> server, listener* where) {
  for (;;) {
    const auto connection_executor =
        where->strands_of != nullptr ? asio::any_io_executor(asio::make_strand(*where->strands_of))
                                     : where->executor;
    auto [ec, socket] = co_await where->acceptor.async_accept(connection_executor,
                                                              asio::as_tuple(asio::use_awaitable));
    if (ec) {
      if (ec == asio::error::operation_aborted || !where->acceptor.is_open()) {
        co_return;
      }
      // EMFILE and friends: back off briefly rather than spin.
      log::warn("accept failed: {}", ec.message());
      asio::steady_timer pause(where->executor, std::chrono::milliseconds(50));
      co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    if (server->stopping.load()) {
      co_return;
    }
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    if (static_cast<std::size_t>(server->connections_open.load()) >=
        server->options.max_connections) {
      socket.close(ignored);
      continue;
    }
    server->update_metrics([where] { where->accepted.add(); });
    const auto id = server->next_connection_id.fetch_add(1);
    auto conn = std::make_shared<connection>(std::move(socket), server.get(), id);
    {
      std::lock_guard lock(server->connections_mutex);
      server->connections.emplace(id, conn);
    }
    server->connections_open.fetch_add(1);
    server->update_metrics([&server] { server->open_connections.add(1); });
    auto executor = conn->stream.get_executor();
    asio::co_spawn(executor, serve_and_forget(server, std::move(conn)), asio::detached);
  }
}

} // namespace

// --- response_stream ----------------------------------------------------------------------

stream_write_result response_stream::try_write(std::string bytes) const {
  if (!state_ || !state_->open.load() || state_->finished.load()) {
    return stream_write_result::closed;
  }
  if (bytes.empty()) {
    return stream_write_result::queued;
  }
  if (state_->channel.try_send(error_code{}, stream_chunk{std::move(bytes), nullptr})) {
    return stream_write_result::queued;
  }
  return state_->channel.is_open() && state_->open.load() ? stream_write_result::full
                                                          : stream_write_result::closed;
}

stream_write_result response_stream::try_write(std::shared_ptr<const std::string> bytes) const {
  if (!state_ || !state_->open.load() || state_->finished.load()) {
    return stream_write_result::closed;
  }
  if (!bytes || bytes->empty()) {
    return stream_write_result::queued;
  }
  if (state_->channel.try_send(error_code{}, stream_chunk{{}, std::move(bytes)})) {
    return stream_write_result::queued;
  }
  return state_->channel.is_open() && state_->open.load() ? stream_write_result::full
                                                          : stream_write_result::closed;
}

stream_write_result response_stream::try_send(const sse_event& event) const {
  return try_write(format_sse_event(event));
}

asio::awaitable<bool> response_stream::write(std::string bytes) const {
  if (!state_ || !state_->open.load() || state_->finished.load()) {
    co_return false;
  }
  if (bytes.empty()) {
    co_return true;
  }
  // A named chunk, not a temporary in the co_await expression: g++ 12 destroys such a
  // temporary aggregate twice.
  stream_chunk chunk{std::move(bytes), nullptr};
  auto [ec] = co_await state_->channel.async_send(error_code{}, std::move(chunk),
                                                  asio::as_tuple(asio::use_awaitable));
  co_return !ec;
}

void response_stream::finish() const {
  if (!state_) {
    return;
  }
  state_->finished.store(true);
  // The empty chunk wakes a writer waiting on an empty queue; when the queue is full
  // the writer sees `finished` after draining it.
  state_->channel.try_send(error_code{}, stream_chunk{});
}

void response_stream::abort() const {
  if (!state_) {
    return;
  }
  state_->aborted.store(true);
  state_->channel.try_send(error_code{}, stream_chunk{});
}

bool response_stream::is_open() const {
  return state_ && state_->open.load() && !state_->finished.load();
}

bool response_stream::client_gone() const {
  return state_ && state_->gone.load();
}

void response_stream::on_disconnect(std::function<void()> callback) const {
  if (!state_) {
    return;
  }
  {
    std::lock_guard lock(state_->callback_mutex);
    if (!state_->disconnect_reported) {
      state_->on_disconnect = std::move(callback);
      return;
    }
  }
  callback();
}

stream_write_result response_stream_ping(const std::shared_ptr<stream_state>& state) {
  if (!state->open.load() || state->finished.load()) {
    return stream_write_result::closed;
  }
  // A full queue already means the client is behind; skipping a ping is harmless.
  if (state->channel.try_send(error_code{}, stream_chunk{format_sse_comment("ping"), nullptr})) {
    return stream_write_result::queued;
  }
  return state->channel.is_open() ? stream_write_result::full : stream_write_result::closed;
}

// --- request_context ----------------------------------------------------------------------

request_context::request_context(http_request request, std::string request_id,
                                 detail::connection* conn)
    : request_(std::move(request)), request_id_(std::move(request_id)),
      log_({{"request_id", request_id_}}), conn_(conn) {}

std::string_view request_context::param(std::string_view name) const noexcept {
  for (const auto& [key, value] : params_) {
    if (key == name) {
      return value;
    }
  }
  return {};
}

asio::any_io_executor request_context::executor() const {
  return conn_->stream.get_executor();
}

asio::ip::address request_context::remote_address() const {
  return conn_ ? conn_->peer : asio::ip::address{};
}

void request_context::extend_deadline(std::chrono::milliseconds from_now) {
  deadline_extension_ = steady_clock::now() + from_now;
}

void request_context::set_route(std::string pattern,
                                std::vector<std::pair<std::string, std::string>> params) {
  route_ = std::move(pattern);
  params_ = std::move(params);
}

response_stream request_context::begin_stream(unsigned status, std::string content_type,
                                              std::vector<http_header> headers) {
  if (!stream_) {
    stream_ = std::make_shared<detail::stream_state>(conn_->stream.get_executor(),
                                                     conn_->server->options.stream_queue_capacity);
    stream_->status = status;
    stream_->content_type = std::move(content_type);
    stream_->headers = std::move(headers);
  }
  return response_stream(stream_);
}

response_stream request_context::begin_sse(std::vector<http_header> headers) {
  headers.push_back({"Cache-Control", "no-cache"});
  headers.push_back({"X-Accel-Buffering", "no"});
  auto stream = begin_stream(200, "text/event-stream", std::move(headers));
  stream_->sse = true;
  stream.try_write(format_sse_comment("ping"));
  return stream;
}

// --- http_server --------------------------------------------------------------------------

http_server_options http_server_options::from(const server_settings& s) {
  http_server_options o;
  o.body_limit_bytes = s.body_limit_bytes;
  o.request_timeout = s.request_timeout;
  o.idle_timeout = s.idle_timeout;
  o.sse_ping_interval = s.sse_ping_interval;
  o.stream_queue_capacity = s.sse_queue_capacity;
  o.max_connections = s.max_connections;
  return o;
}

struct http_server::impl {
  std::shared_ptr<server_state> state;
};

http_server::http_server(asio::io_context& io, router routes, http_server_options options,
                         metrics_registry& metrics)
    : impl_(std::make_shared<impl>()) {
  impl_->state =
      std::make_shared<server_state>(std::vector<asio::any_io_executor>{io.get_executor()}, &io,
                                     std::move(routes), std::move(options), metrics);
}

http_server::http_server(std::vector<asio::any_io_executor> executors, router routes,
                         http_server_options options, metrics_registry& metrics)
    : impl_(std::make_shared<impl>()) {
  if (executors.empty()) {
    throw std::invalid_argument("http_server needs at least one executor");
  }
  impl_->state = std::make_shared<server_state>(std::move(executors), nullptr, std::move(routes),
                                                std::move(options), metrics);
}

namespace {

/// Lets several sockets bind one address; the kernel spreads new connections among them.
using reuse_port = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

error_code open_acceptor(tcp::acceptor& acceptor, const tcp::endpoint& ep, bool share) {
  error_code ec;
  acceptor.open(ep.protocol(), ec);
  if (!ec) {
    acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  }
  if (!ec && share) {
    acceptor.set_option(reuse_port(true), ec);
  }
  if (!ec) {
    acceptor.bind(ep, ec);
  }
  if (!ec) {
    acceptor.listen(asio::socket_base::max_listen_connections, ec);
  }
  if (ec) {
    error_code ignored;
    acceptor.close(ignored);
  }
  return ec;
}

} // namespace

expected<endpoint> http_server::listen(const endpoint& where) {
  auto& listeners = impl_->state->listeners;
  error_code ec;
  const auto address = asio::ip::make_address(where.host, ec);
  if (ec) {
    return fail(errc::invalid_argument,
                fmt::format("'{}' is not an IP address: {}", where.host, ec.message()));
  }
  const bool share = listeners.size() > 1;
  // The first acceptor picks the port (when 0 was asked); the others join it.
  tcp::endpoint ep{address, where.port};
  for (std::size_t i = 0; i < listeners.size(); ++i) {
    ec = open_acceptor(listeners[i]->acceptor, ep, share);
    if (ec) {
      for (std::size_t j = 0; j < i; ++j) {
        error_code ignored;
        listeners[j]->acceptor.close(ignored);
      }
      return fail(errc::io_error,
                  fmt::format("cannot listen on {}: {}", where.to_string(), ec.message()));
    }
    if (i == 0) {
      ep = listeners[0]->acceptor.local_endpoint();
    }
  }
  return endpoint{ep.address().to_string(), ep.port()};
}

void http_server::start() {
  auto state = impl_->state;
  for (auto& l : state->listeners) {
    asio::co_spawn(l->executor, accept_loop(state, l.get()), asio::detached);
  }
}

std::size_t http_server::open_connections() const {
  std::lock_guard lock(impl_->state->connections_mutex);
  return impl_->state->connections.size();
}

namespace {

std::vector<std::shared_ptr<connection>> live_connections(server_state& server) {
  std::vector<std::shared_ptr<connection>> out;
  std::lock_guard lock(server.connections_mutex);
  for (auto& [id, weak] : server.connections) {
    if (auto conn = weak.lock()) {
      out.push_back(std::move(conn));
    }
  }
  return out;
}

// Closes a connection's socket from its own strand.
void close_connection(const std::shared_ptr<connection>& conn) {
  asio::post(conn->stream.get_executor(), [conn] {
    error_code ignored;
    conn->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    conn->stream.socket().close(ignored);
  });
}

asio::awaitable<void> drain(std::shared_ptr<server_state> server, std::chrono::milliseconds grace,
                            std::function<void()> done) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  const auto deadline = steady_clock::now() + grace;
  auto remaining = [&] {
    std::lock_guard lock(server->connections_mutex);
    return server->connections.size();
  };
  // Idle keep-alive connections have nothing in flight: close them now. A connection
  // that turns idle later sees `stopping` before it reads again.
  for (auto& conn : live_connections(*server)) {
    if (conn->state.load() == connection::phase::idle) {
      close_connection(conn);
    }
  }
  while (remaining() > 0 && steady_clock::now() < deadline) {
    timer.expires_after(std::chrono::milliseconds(10));
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    for (auto& conn : live_connections(*server)) {
      if (conn->state.load() == connection::phase::idle) {
        close_connection(conn);
      }
    }
  }
  if (remaining() > 0) {
    log::warn("shutdown grace of {} ms over; closing {} connection(s)", grace.count(), remaining());
    for (auto& conn : live_connections(*server)) {
      close_connection(conn);
    }
    const auto hard_deadline = steady_clock::now() + std::chrono::seconds(2);
    while (remaining() > 0 && steady_clock::now() < hard_deadline) {
      timer.expires_after(std::chrono::milliseconds(5));
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
  }
  done();
}

} // namespace

void http_server::stop(std::chrono::milliseconds grace, std::function<void()> done) {
  auto state = impl_->state;
  state->stopping.store(true);
  // Every acceptor is closed on its own executor; the drain starts once all are.
  auto pending = std::make_shared<std::atomic<std::size_t>>(state->listeners.size());
  auto finish = std::make_shared<std::function<void()>>(std::move(done));
  for (auto& l : state->listeners) {
    asio::post(l->executor, [state, grace, pending, finish, where = l.get()] {
      error_code ignored;
      where->acceptor.close(ignored);
      if (pending->fetch_sub(1) == 1) {
        asio::co_spawn(state->listeners.front()->executor, drain(state, grace, std::move(*finish)),
                       asio::detached);
      }
    });
  }
}

http_server::~http_server() {
  auto state = impl_->state;
  // From here on the owner may destroy the metrics registry; connections that are still
  // open finish without touching it, and are closed now rather than when their peers go.
  {
    std::lock_guard lock(state->metrics_mutex);
    state->metrics_live = false;
  }
  state->stopping.store(true);
  for (auto& l : state->listeners) {
    asio::post(l->executor, [state, where = l.get()] {
      error_code ignored;
      where->acceptor.close(ignored);
    });
  }
  for (auto& conn : live_connections(*state)) {
    close_connection(conn);
  }
}

} // namespace troupe::net
