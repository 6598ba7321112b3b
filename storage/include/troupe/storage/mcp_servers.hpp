#pragma once

/// \file
/// The node's MCP servers in the `mcp_servers` table: the `[[mcp_servers]]` of the config
/// are synced in at every start (by name), `PUT /api/v1/runtime/mcp` replaces the whole
/// set, and the node connects to what the table holds. `transport` is stdio or http,
/// `endpoint` the command or the URL; `config_json` holds the rest, with `env` and
/// `headers` (secrets) sealed by the data directory's secret box.

#include <vector>

#include "troupe/runtime/mcp_config.hpp"
#include "troupe/storage/connection.hpp"
#include "troupe/storage/secret_box.hpp"

namespace troupe::storage {

/// Every server in the table, by name. Fails when a row's secrets cannot be opened (a
/// different `secret.key`) or its config is not what this build writes.
expected<std::vector<mcp_server_settings>> load_mcp_servers(connection& c, const secret_box& box);

/// Replaces the whole set with `servers` (run inside the caller's transaction: the
/// store writer's batch).
expected<void> replace_mcp_servers(connection& c, const std::vector<mcp_server_settings>& servers,
                                   const secret_box& box);

/// Inserts or updates each of `servers` by name, in one transaction; other rows stay.
/// Returns how many were written.
expected<std::size_t> sync_declared_mcp_servers(connection& c,
                                                const std::vector<mcp_server_settings>& servers,
                                                const secret_box& box);

} // namespace troupe::storage
