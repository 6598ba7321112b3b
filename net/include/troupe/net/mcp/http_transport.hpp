#pragma once

/// \file
/// The Streamable HTTP transport (MCP 2025-03-26 and later): every message is a POST to
/// one endpoint with `Accept: application/json, text/event-stream`. A request is answered
/// with a JSON body or an SSE stream that carries the server's notifications and requests
/// and then the answer; notifications and responses get 202. The `Mcp-Session-Id` the
/// server gives at `initialize` goes on every later request, with
/// `MCP-Protocol-Version`. A response stream that ends before its answer is resumed with
/// a GET carrying `Last-Event-ID`, after the server's `retry` delay (SEP-1699); a 404 on
/// a session means it is gone (the client starts a new one); `close` DELETEs the session.
/// The server's own stream (a GET) is opened on request and resumed the same way.
/// Every request has a deadline.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "troupe/net/http_client.hpp"
#include "troupe/net/mcp/transport.hpp"

namespace troupe::net::mcp {

/// Where the server is and how to talk to it.
struct http_options {
  /// The server's name, for the log.
  std::string name;
  /// The MCP endpoint (http or https).
  std::string url;
  /// Sent with every request (an `Authorization` header, say).
  std::vector<http_header> headers;
  std::chrono::milliseconds connect_timeout{10'000};
  /// Largest JSON body accepted.
  std::size_t max_body_bytes = 16 * 1024 * 1024;
  /// Reconnections of one stream in a row without an event in between before it is
  /// given up.
  unsigned max_resume_attempts = 5;
  /// The wait before a reconnection when the server sent no `retry`.
  std::chrono::milliseconds default_retry{1'000};
};

/// A Streamable HTTP transport whose requests go through `client` (which must outlive it
/// and belong to the same executor).
std::shared_ptr<transport> make_http_transport(http_client& client, http_options options);

} // namespace troupe::net::mcp
