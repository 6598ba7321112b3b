#pragma once

/// \file
/// The MCP facade: how the HTTP layer reads and replaces the node's MCP servers
/// (`GET|PUT /api/v1/runtime/mcp`) without seeing the tools layer's connections.
/// Implemented in actors/ over tools::mcp_servers (service_facades.hpp). Thread-safe.

#include <vector>

#include "troupe/runtime/mcp_config.hpp"

namespace troupe::actors {

class mcp_facade {
public:
  virtual ~mcp_facade() = default;

  /// The set now, in order.
  virtual std::vector<mcp_server_settings> settings() const = 0;
  /// Each server's state, in the set's order.
  virtual std::vector<mcp_server_status> status() const = 0;
  /// Makes `servers` the set (already validated and stored): unchanged servers keep their
  /// connection, removed ones are closed, new and changed ones connect. Returns at once.
  virtual void apply(std::vector<mcp_server_settings> servers) = 0;
};

} // namespace troupe::actors
