#pragma once

/// \file
/// The stdio face of an MCP server that speaks Streamable HTTP (`troupe mcp serve`): each
/// JSON-RPC line read on stdin is POSTed to the endpoint with the bearer token, and what
/// comes back (a JSON body, or each message of an SSE answer as it arrives) is written to
/// stdout, one message per line. The session id the server gives at `initialize` and the
/// protocol version it agrees go on every later request; requests are relayed
/// concurrently (a long `tools/call` does not hold up a `ping` or a
/// `notifications/cancelled`). When stdin ends, the session is ended (DELETE) and the
/// bridge returns. Failures of a request are answered to the client as JSON-RPC errors.

#include <string>

namespace troupe::net::mcp {

struct stdio_bridge_options {
  /// The MCP endpoint, e.g. http://127.0.0.1:8080/mcp.
  std::string url;
  /// The API bearer token.
  std::string token;
  /// Where messages come from and go to.
  int in_fd = 0;
  int out_fd = 1;
};

/// Relays until `in_fd` ends. Returns 0, or 1 when the endpoint could not be used at all.
int run_stdio_bridge(const stdio_bridge_options& options);

} // namespace troupe::net::mcp
