#pragma once

/// \file
/// One-shot MCP client sessions for `troupe mcp`: list a server's tools, call one, or
/// act as the client the official conformance suite drives
/// (`npx @modelcontextprotocol/conformance client --command "troupe mcp client"`). Each
/// runs its own io_context on the calling thread, prints to the given streams and
/// returns the process's exit code (0 ok, 1 the server or the tool failed).

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "troupe/net/http_message.hpp"
#include "troupe/net/mcp/protocol.hpp"

namespace troupe::net::mcp {

/// The server of a one-shot session: a Streamable HTTP URL, or a command (stdio).
struct server_target {
  std::string url;
  std::vector<std::string> command;
  std::vector<http_header> headers;
  std::map<std::string, std::string> env;
  /// Each request's deadline.
  std::chrono::milliseconds timeout{60'000};
};

/// `troupe mcp tools`: connects, lists every tool and prints each (name, then its
/// description and input schema indented), or one JSON object per line when `json`.
int list_tools_command(const server_target& target, bool json, std::FILE* out, std::FILE* err);

/// `troupe mcp call`: calls `tool` with `arguments_json` and prints the result's text
/// (or the whole result as JSON when `json`); exit code 1 when the tool failed.
int call_tool_command(const server_target& target, const std::string& tool,
                      const std::string& arguments_json, bool json, std::FILE* out, std::FILE* err);

/// `troupe mcp client`: the client the conformance suite drives. It connects to `url`
/// (declaring elicitation, answered with the schema's defaults), lists the tools and
/// calls each with arguments made from its schema (`example_arguments`), printing what
/// it does; then closes the session. `scenario` (MCP_CONFORMANCE_SCENARIO) is printed.
int conformance_client_command(const std::string& url, const std::string& scenario, std::FILE* out,
                               std::FILE* err);

} // namespace troupe::net::mcp
