#pragma once

/// \file
/// How an MCP client reaches its server: the transport carries JSON-RPC messages both
/// ways. Two exist: stdio (a child process, one message per line; stdio_transport.hpp)
/// and Streamable HTTP (POSTs answered with JSON or SSE; http_transport.hpp).
///
/// Threading: a transport and its events belong to one executor that runs on one thread
/// at a time (a strand); call it only from coroutines on that executor.

#include <chrono>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "troupe/net/mcp/jsonrpc.hpp"
#include "troupe/runtime/error.hpp"

namespace troupe::net::mcp {

namespace asio = boost::asio;

/// What a transport tells its client. Called on the transport's executor.
class transport_events {
public:
  virtual ~transport_events() = default;
  /// A message from the server.
  virtual void on_message(jsonrpc_message message) = 0;
  /// The answer to request `id_json` will not come through this transport (an HTTP
  /// response stream ended and could not be resumed): fail the request with `why`.
  virtual void on_request_lost(const std::string& id_json, error why) = 0;
  /// The transport is gone for good (the process exited): every request in flight fails.
  virtual void on_closed(error why) = 0;
};

/// One connection to one server.
class transport {
public:
  virtual ~transport() = default;

  /// Starts it (stdio: spawns the process). Events go to `events` from now on; the
  /// transport keeps only a weak reference.
  virtual asio::awaitable<expected<void>> start(std::weak_ptr<transport_events> events) = 0;

  /// Sends one message. For a request, `request_id` is its id (JSON text): over HTTP the
  /// answer may come on the POST's own response, which is then read (and resumed) until
  /// that answer arrives. Fails with `unavailable` when the server is gone, `not_found`
  /// when an HTTP server no longer knows the session (start a new one), `timeout` when
  /// `deadline` passes first.
  virtual asio::awaitable<expected<void>> send(std::string message, std::string request_id,
                                               std::chrono::steady_clock::time_point deadline) = 0;

  /// After `initialize`: the version agreed (HTTP sends it as `MCP-Protocol-Version`).
  virtual void set_protocol_version(std::string version) = 0;

  /// After `initialize` (HTTP only): opens the server's own event stream (GET), kept
  /// open and resumed until close; a server without one (405) is fine.
  virtual void open_event_stream() {}

  /// Forgets a session the server no longer knows (HTTP: the next `initialize` starts a
  /// new one).
  virtual void reset_session() {}

  /// Stops reading the answer to `request_id` (a cancelled request).
  virtual void abandon(const std::string& request_id) {
    (void)request_id;
  }

  /// Ends it (stdio: closes stdin, then SIGTERM and SIGKILL to a process that stays;
  /// HTTP: DELETE of the session). Idempotent.
  virtual asio::awaitable<void> close() = 0;

  /// True until it closed or its server went away.
  virtual bool is_open() const noexcept = 0;

  /// What it is, for errors and logs ("stdio: npx -y server", "http: https://…").
  virtual std::string describe() const = 0;

  /// The server's process id (stdio, while it runs), else 0.
  virtual long process_id() const noexcept {
    return 0;
  }
};

} // namespace troupe::net::mcp
