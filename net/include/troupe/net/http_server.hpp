#pragma once

/// \file
/// The HTTP/1.1 server: Beast on Asio coroutines, a routing table with path parameters,
/// keep-alive, a deadline per request, a body limit, JSON errors everywhere, chunked
/// streaming responses (SSE) with bounded queues, metrics and graceful shutdown.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>

#include "troupe/net/http_message.hpp"
#include "troupe/net/sse.hpp"
#include "troupe/runtime/error.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/runtime/metrics.hpp"
#include "troupe/runtime/settings.hpp"

namespace troupe::net {

namespace asio = boost::asio;

namespace detail {
struct stream_state;
struct connection;
} // namespace detail

/// What `response_stream::try_write` did with a chunk.
enum class stream_write_result {
  /// Queued; it will be written in order.
  queued,
  /// The queue is full: the client is not keeping up. Nothing was queued.
  full,
  /// The stream is over (client gone, finished, or server stopped). Nothing was queued.
  closed,
};

/// The producer's handle on a streaming (chunked) response, e.g. an SSE stream.
/// Copyable and thread-safe: actors and coroutines on any thread may write to it. Writes
/// go through a bounded queue, so a slow client holds up only its own stream.
class response_stream {
public:
  response_stream() = default;

  /// Queues raw bytes to be sent as one chunk; never blocks.
  stream_write_result try_write(std::string bytes) const;
  /// Queues bytes shared with other streams (encoded once for all of them); they are
  /// read in place, never copied into the queue. Never blocks.
  stream_write_result try_write(std::shared_ptr<const std::string> bytes) const;
  /// Queues one SSE event; never blocks.
  stream_write_result try_send(const sse_event& event) const;
  /// Queues bytes, waiting for room when the queue is full (back-pressure for coroutine
  /// producers). False when the stream is over.
  asio::awaitable<bool> write(std::string bytes) const;
  /// Ends the response after everything queued has been written.
  void finish() const;
  /// Drops the connection at once (TCP reset); used to inject faults in tests.
  void abort() const;
  /// False once the stream is over.
  bool is_open() const;
  /// True when the stream ended because the client went away or could not be written to.
  bool client_gone() const;
  /// Calls `callback` once, on an io thread, if the client disconnects before the
  /// producer finishes. If it already has, calls it at once.
  void on_disconnect(std::function<void()> callback) const;

  explicit operator bool() const noexcept {
    return state_ != nullptr;
  }

private:
  friend class request_context;
  explicit response_stream(std::shared_ptr<detail::stream_state> state)
      : state_(std::move(state)) {}
  std::shared_ptr<detail::stream_state> state_;
};

/// Everything a route handler gets: the request, path parameters, the request id and a
/// logger that stamps it, and the means to turn the response into a stream.
class request_context {
public:
  request_context(http_request request, std::string request_id, detail::connection* conn);

  const http_request& request() const noexcept {
    return request_;
  }
  http_request& request() noexcept {
    return request_;
  }
  /// The value of path parameter `{name}`, percent-decoded, or empty.
  std::string_view param(std::string_view name) const noexcept;
  /// The id stamped on every log line and echoed as `X-Request-Id`.
  const std::string& request_id() const noexcept {
    return request_id_;
  }
  const log::context& log() const noexcept {
    return log_;
  }
  /// The executor this request runs on.
  asio::any_io_executor executor() const;
  /// The address of the client's end of the connection (unspecified when unknown).
  asio::ip::address remote_address() const;

  /// Starts a chunked response; the handler's returned response is then ignored. The
  /// request deadline no longer applies; the stream runs until the producer finishes it,
  /// the client leaves, or the server's shutdown grace runs out.
  response_stream begin_stream(unsigned status, std::string content_type,
                               std::vector<http_header> headers = {});
  /// `begin_stream` for Server-Sent Events: text/event-stream, no caching, no proxy
  /// buffering, an immediate ping and then one per configured interval.
  response_stream begin_sse(std::vector<http_header> headers = {});
  /// Lets this request's handler run until `from_now` from now instead of the server's
  /// request deadline (for work known to be long, such as a blocking agent run).
  void extend_deadline(std::chrono::milliseconds from_now);
  /// The extended deadline, or a time in the past when none was asked for.
  std::chrono::steady_clock::time_point deadline_extension() const noexcept {
    return deadline_extension_;
  }

  /// True once `begin_stream` was called.
  bool streaming() const noexcept {
    return stream_ != nullptr;
  }

  /// Set by the router: parameters and the pattern that matched.
  void set_route(std::string pattern, std::vector<std::pair<std::string, std::string>> params);
  const std::string& route_pattern() const noexcept {
    return route_;
  }

  // Used by the server to run the stream after the handler returns.
  const std::shared_ptr<detail::stream_state>& stream_state() const noexcept {
    return stream_;
  }

private:
  http_request request_;
  std::string request_id_;
  log::context log_;
  detail::connection* conn_;
  std::string route_;
  std::vector<std::pair<std::string, std::string>> params_;
  std::shared_ptr<detail::stream_state> stream_;
  std::chrono::steady_clock::time_point deadline_extension_{};
};

/// A route handler. It runs on an io thread, must not block, and is cancelled when the
/// request deadline passes (its answer is then a 504).
using route_handler = std::function<asio::awaitable<http_response>(request_context&)>;

/// A routing table: method + path pattern with `{param}` segments, e.g.
/// `/api/v1/runs/{id}/events`. Literal segments win over parameters.
class router {
public:
  /// Adds a route; later additions do not override earlier identical patterns.
  void add(http_method method, std::string_view pattern, route_handler handler);

  /// The result of matching a request path.
  struct match {
    const route_handler* handler = nullptr;
    std::string pattern;
    std::vector<std::pair<std::string, std::string>> params;
    /// Methods the path would accept, when it matched only with another method (405).
    std::vector<http_method> allowed;
  };
  match find(http_method method, std::string_view path) const;

private:
  struct segment {
    std::string text;
    bool is_param = false;
  };
  struct route {
    http_method method;
    std::string pattern;
    std::vector<segment> segments;
    route_handler handler;
  };
  std::vector<route> routes_;
};

/// Knobs of one server (from `server_settings`).
struct http_server_options {
  std::size_t body_limit_bytes = 1024 * 1024;
  std::size_t header_limit_bytes = 16 * 1024;
  std::chrono::milliseconds request_timeout{30'000};
  std::chrono::milliseconds idle_timeout{65'000};
  std::chrono::milliseconds sse_ping_interval{15'000};
  std::size_t stream_queue_capacity = 256;
  std::size_t max_connections = 100'000;
  std::string server_name = "troupe";

  static http_server_options from(const server_settings& s);
};

/// The server. Create it, `listen`, `start`; `stop` for a graceful shutdown.
class http_server {
public:
  /// One acceptor on `io`, which any number of threads may run: each connection gets a
  /// strand of its own.
  http_server(asio::io_context& io, router routes, http_server_options options,
              metrics_registry& metrics);
  /// One acceptor per executor (SO_REUSEPORT when more than one, so the kernel spreads
  /// connections among them); a connection's session runs on the executor that accepted
  /// it. Each executor must run on one thread (a shard). `troupe_http_connections_total`
  /// counts accepted connections per executor (label `shard`, its index).
  http_server(std::vector<asio::any_io_executor> executors, router routes,
              http_server_options options, metrics_registry& metrics);
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// Binds and listens. Returns the bound address (the real port when 0 was asked).
  expected<endpoint> listen(const endpoint& where);
  /// Starts accepting connections.
  void start();
  /// Graceful shutdown: stops accepting, closes idle keep-alive connections, lets
  /// in-flight requests and streams finish for up to `grace`, then closes the rest.
  /// `done` is called (on an io thread: the first executor's) once every connection is
  /// gone.
  void stop(std::chrono::milliseconds grace, std::function<void()> done);

  /// Connections open now.
  std::size_t open_connections() const;

private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

} // namespace troupe::net
