#pragma once

/// \file
/// The MCP client: one session with one server over a transport (stdio or Streamable
/// HTTP). It performs the handshake (offering protocol 2025-11-25, accepting 2025-06-18
/// and the 2025-03-26 downgrade), lists tools page by page, calls them with a progress
/// token (progress notifications extend the call's deadline up to its hard limit),
/// cancels a call whose caller is cancelled or whose deadline passes (with
/// notifications/cancelled), answers the server's `ping` and `elicitation/create`
/// (schema defaults, or decline, by policy) and reports notifications/tools/list_changed.
/// Every request has a deadline. An HTTP session the server forgot (404) is replaced by a
/// new one and the request sent again, once.
///
/// Threading: a client belongs to one executor that runs on one thread at a time (a
/// strand), as its transport does; call it only from coroutines on that executor (from
/// elsewhere: `co_spawn(executor, client->call_tool(…), use_awaitable)`, which also
/// carries the caller's cancellation over).

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "troupe/net/mcp/protocol.hpp"
#include "troupe/net/mcp/transport.hpp"
#include "troupe/runtime/log.hpp"

namespace troupe::net::mcp {

/// One progress notification of a call.
struct progress_update {
  double progress = 0;
  std::optional<double> total;
  std::string message;
};

using progress_callback = std::function<void(const progress_update&)>;

/// How a client behaves.
struct client_options {
  /// The server's name, for errors and the log.
  std::string name;
  client_identity identity;
  /// How `elicitation/create` is answered (and whether the capability is declared).
  elicitation_policy elicitation = elicitation_policy::decline;
  /// The deadline of initialize, tools/list pages and ping.
  std::chrono::milliseconds request_timeout{30'000};
  /// Over HTTP, open the server's own stream when it announces tools.listChanged (where
  /// such notifications come between requests) or elicitation is answered (a server may
  /// send elicitation/create there).
  bool open_event_stream = true;
  /// Called (on the client's executor) when the server says its tools changed, and after
  /// a new session replaced a forgotten one.
  std::function<void()> on_tools_changed;
  /// Called once when the transport is gone for good (not after `close`).
  std::function<void(const error&)> on_closed;
};

/// A session with one server.
class client : public transport_events, public std::enable_shared_from_this<client> {
public:
  /// A client over `transport` (not started) on `executor`.
  static std::shared_ptr<client> make(asio::any_io_executor executor,
                                      std::shared_ptr<transport> transport, client_options options);

  client(asio::any_io_executor executor, std::shared_ptr<transport> transport,
         client_options options);

  /// Starts the transport and performs the handshake. Fails with what the transport or
  /// the server said (a version troupe does not speak is an error naming it).
  asio::awaitable<expected<server_identity>> connect();

  /// Every tool of the server (all pages; at most 1000 pages).
  asio::awaitable<expected<std::vector<tool_info>>> list_tools();

  /// Calls tool `name` with `arguments_json`. `timeout` is reset by each progress
  /// notification, but the call never runs past `hard_limit` (0: `timeout`). A cancelled
  /// caller or a passed deadline cancels the call at the server. A result with
  /// `isError: true` is a value (`call_outcome::is_error`), not an error.
  asio::awaitable<expected<call_outcome>> call_tool(std::string name, std::string arguments_json,
                                                    std::chrono::milliseconds timeout,
                                                    std::chrono::milliseconds hard_limit = {},
                                                    progress_callback on_progress = {});

  /// A ping, answered within the request timeout.
  asio::awaitable<expected<void>> ping();

  /// Ends the session: requests in flight fail with `cancelled`, the transport closes.
  asio::awaitable<void> close();

  /// True after `connect` succeeded, until the transport is gone or `close`.
  bool is_open() const noexcept {
    return open_;
  }
  /// What the server said at the handshake.
  const server_identity& server() const noexcept {
    return server_;
  }
  /// The transport's description.
  std::string describe() const {
    return transport_->describe();
  }
  /// The server's process id (stdio), else 0.
  long process_id() const noexcept {
    return transport_->process_id();
  }

  // transport_events
  void on_message(jsonrpc_message message) override;
  void on_request_lost(const std::string& id_json, error why) override;
  void on_closed(error why) override;

private:
  struct pending;
  using params_writer = std::function<std::string(const std::string& id_json)>;

  asio::awaitable<expected<std::string>> request(std::string method, params_writer params,
                                                 std::chrono::milliseconds timeout,
                                                 std::chrono::milliseconds hard_limit,
                                                 progress_callback on_progress, bool may_renew);
  asio::awaitable<expected<void>> initialize();
  asio::awaitable<expected<void>> renew_session();
  void answer(const jsonrpc_message& request);
  void send_detached(std::string message);
  void fail_all(const error& why);

  asio::any_io_executor executor_;
  std::shared_ptr<transport> transport_;
  client_options options_;
  log::context log_;
  server_identity server_;
  std::map<std::string, std::shared_ptr<pending>> pending_;
  std::int64_t next_id_ = 1;
  bool open_ = false;
  bool closing_ = false;
  bool closed_reported_ = false;
  /// Set while a new session replaces a forgotten one; requests wait for it.
  std::shared_ptr<asio::steady_timer> renewing_;
  std::optional<error> renew_failure_;
};

} // namespace troupe::net::mcp
