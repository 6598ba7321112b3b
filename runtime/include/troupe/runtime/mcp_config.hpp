#pragma once

/// \file
/// MCP servers as written in the config file (`[[mcp_servers]]`) or sent to
/// `PUT /api/v1/runtime/mcp`. These keys are a contract:
///
///     [[mcp_servers]]
///     name = "everything"              # 1-32 of [A-Za-z0-9_-], no "__": tools are
///                                      # offered as <name>__<tool>
///     command = "npx"                  # stdio: the program (on PATH) ...
///     args = ["-y", "@modelcontextprotocol/server-everything"]
///     env = { API_KEY = "…" }          # ... and variables added to its environment
///
///     [[mcp_servers]]
///     name = "search"
///     url = "https://mcp.example.org/mcp"      # Streamable HTTP
///     headers = { Authorization = "Bearer …" }
///     agents = ["assistant"]           # who may use its tools; empty or absent: every
///                                      # agent whose `tools` list is empty
///     elicitation = "decline"          # decline | defaults (accept with the schema's
///                                      # defaults)
///     timeout_s = 60                   # one call's limit (progress extends it, up to
///                                      # tools.timeout_ms)
///     enabled = true
///
/// Exactly one of `command` and `url`. `env` and `headers` values are secrets: never
/// logged, printed or returned by the API.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/runtime/error.hpp"

namespace troupe {

/// One MCP server.
struct mcp_server_settings {
  std::string name;
  /// stdio: the program and its arguments.
  std::string command;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  /// Streamable HTTP: the endpoint and the headers sent with every request.
  std::string url;
  std::map<std::string, std::string> headers;
  /// Agents (names) that may use the server's tools; empty: every agent whose own
  /// `tools` list is empty.
  std::vector<std::string> agents;
  /// "decline" or "defaults".
  std::string elicitation = "decline";
  /// A call's limit in seconds.
  std::uint32_t timeout_s = 60;
  bool enabled = true;

  /// "stdio" or "http".
  std::string_view transport() const noexcept {
    return url.empty() ? "stdio" : "http";
  }
  friend bool operator==(const mcp_server_settings&, const mcp_server_settings&) = default;
};

/// Where a configured server stands (the node's MCP connections report it).
struct mcp_server_status {
  std::string name;
  /// connecting | ready | restarting | failed | disabled | stopped.
  std::string state;
  /// Why it is not ready, or empty.
  std::string error;
  std::string protocol_version;
  /// What the server calls itself.
  std::string server_name;
  std::string server_version;
  /// The tools as agents see them (`<server>__<tool>`).
  std::vector<std::string> tools;
  /// Failed connections and restarts so far.
  std::uint64_t restarts = 0;
  /// The process of a stdio server while it runs, else 0.
  long pid = 0;
  /// Tool calls under way now, and made since the node started.
  std::uint64_t calls_in_flight = 0;
  std::uint64_t calls_total = 0;
};

/// The separator between a server's name and its tool's in the names agents see.
inline constexpr std::string_view mcp_tool_separator = "__";

/// Checks one server: a valid name, exactly one of command and url (http or https), env
/// names that are variable names, header names that are tokens (and no CR or LF in a
/// value), a known elicitation policy, timeout_s from 1 to 86400. Errors start with the
/// server's name.
expected<void> validate_mcp_server(const mcp_server_settings& server);

/// `validate_mcp_server` for each, and unique names.
expected<void> validate_mcp_servers(const std::vector<mcp_server_settings>& servers);

/// The servers as the API shows them: `{"servers":[{…}]}`, with the values of `env` and
/// `headers` replaced by "<redacted>" when `redact`.
std::string mcp_servers_json(const std::vector<mcp_server_settings>& servers, bool redact);

/// One server as JSON (what `mcp_servers_json` writes per entry).
std::string mcp_server_json(const mcp_server_settings& server, bool redact);

/// Reads `{"servers":[…]}` (or a bare array) as `PUT /api/v1/runtime/mcp` sends it; unknown
/// fields and wrong types are errors naming the field ("servers[1].args: …"). Does not
/// validate (see `validate_mcp_servers`).
expected<std::vector<mcp_server_settings>> parse_mcp_servers_json(std::string_view json);

/// The servers as `[[mcp_servers]]` tables (for `--print-config`), secrets not printed.
std::string mcp_servers_toml(const std::vector<mcp_server_settings>& servers);

} // namespace troupe
