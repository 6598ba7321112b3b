#pragma once

/// \file
/// The MCP messages troupe's client reads and writes, beyond JSON-RPC framing: the
/// initialize handshake, `tools/list` pages, `tools/call` results turned into the text a
/// model sees, and elicitation requests answered with their schema's defaults. Pure
/// functions over JSON text (simdjson in, json_writer out), shared by the client and its
/// tests.

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/runtime/error.hpp"

namespace troupe::net::mcp {

/// The newest protocol version troupe speaks: what its client offers in `initialize`.
inline constexpr std::string_view latest_protocol_version = "2025-11-25";

/// Every version troupe's client accepts from a server, newest first: the two it offers
/// and the 2025-03-26 downgrade an older Streamable HTTP server may answer with.
inline constexpr std::array<std::string_view, 3> supported_protocol_versions = {
    "2025-11-25", "2025-06-18", "2025-03-26"};

/// True when `version` is one of `supported_protocol_versions`.
bool supported_protocol_version(std::string_view version) noexcept;

/// Who the client says it is and what it can do.
struct client_identity {
  std::string name = "troupe";
  std::string version;
  /// Declare the `elicitation` capability (form mode): the server may ask.
  bool elicitation = false;
};

/// The params of `initialize` offering `protocol_version`.
std::string write_initialize_params(const client_identity& client,
                                    std::string_view protocol_version = latest_protocol_version);

/// What a server answered to `initialize`.
struct server_identity {
  std::string protocol_version;
  std::string name;
  std::string version;
  std::string instructions;
  /// The server offers tools (`capabilities.tools`).
  bool has_tools = false;
  /// It sends notifications/tools/list_changed (`capabilities.tools.listChanged`).
  bool tools_list_changed = false;
};

/// Reads an `initialize` result. Fails when `protocolVersion` is missing, or is one
/// troupe does not speak (the error names it and the supported ones).
expected<server_identity> parse_initialize_result(std::string_view result_json);

/// One tool of a server.
struct tool_info {
  std::string name;
  std::string title;
  std::string description;
  /// `inputSchema` as JSON text (`{"type":"object"}` when the server gave none).
  std::string input_schema;
  /// `annotations.readOnlyHint`: calls change nothing.
  bool read_only = false;
};

/// One page of `tools/list`.
struct tool_page {
  std::vector<tool_info> tools;
  /// Empty on the last page.
  std::string next_cursor;
};

/// The params of `tools/list` for the page after `cursor` (empty: the first).
std::string write_list_tools_params(std::string_view cursor);

/// Reads a `tools/list` result. A tool without a name is an error; one whose schema is
/// not an object is given an empty object schema.
expected<tool_page> parse_tools_list_result(std::string_view result_json);

/// The params of `tools/call`; `progress_token` (JSON text) is sent as
/// `_meta.progressToken` when not empty. `arguments_json` empty sends `{}`.
std::string write_call_tool_params(std::string_view name, std::string_view arguments_json,
                                   std::string_view progress_token = {});

/// What a `tools/call` gave back.
struct call_outcome {
  /// `isError: true`: the tool failed (its text says why).
  bool is_error = false;
  /// The content as the text a model reads: text parts as they are, other parts
  /// described (`[image image/png, 1.2 KiB]`, a resource's URI and its text, a link's
  /// name and URI), one per line; `structuredContent` when there is no content.
  std::string text;
  /// `structuredContent` as JSON text, or empty.
  std::string structured;
};

/// Reads a `tools/call` result.
expected<call_outcome> parse_call_result(std::string_view result_json);

/// How the client answers an `elicitation/create` request.
enum class elicitation_policy {
  /// Accept with the requested schema's defaults when every required field has one;
  /// otherwise decline.
  accept_defaults,
  /// Always decline.
  decline,
};

/// `elicitation_policy` by name ("defaults", "decline").
expected<elicitation_policy> parse_elicitation_policy(std::string_view name);
std::string_view to_string(elicitation_policy policy) noexcept;

/// The result of an `elicitation/create` request under `policy` (its params as JSON
/// text): `{"action":"accept","content":{…defaults…}}` or `{"action":"decline"}`. URL
/// mode requests, and form requests with a required field that has no default, are
/// declined.
std::string answer_elicitation(std::string_view params_json, elicitation_policy policy);

/// Example arguments for a tool, made from its input schema: each property's `default`,
/// else its first `enum` value, else a value of its type (numbers count up from 1,
/// strings are "test", booleans true), for the required properties and for those with a
/// default. How `troupe mcp client` calls the tools a conformance scenario offers.
std::string example_arguments(std::string_view input_schema_json);

} // namespace troupe::net::mcp
