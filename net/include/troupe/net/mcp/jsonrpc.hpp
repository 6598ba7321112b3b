#pragma once

/// \file
/// JSON-RPC 2.0 framing as MCP uses it: requests, notifications, responses and error
/// responses, alone or in a batch (an array, which servers of protocol 2025-03-26 may
/// send). Parsed with simdjson, written with json_writer. Ids, params and results are
/// kept as JSON text: an id goes back to its peer byte for byte, whatever its type.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/runtime/error.hpp"

namespace troupe::net::mcp {

/// The error codes of JSON-RPC 2.0 (and MCP's use of them).
namespace jsonrpc_code {
/// The text is not JSON.
inline constexpr int parse_error = -32700;
/// JSON, but not a valid JSON-RPC message.
inline constexpr int invalid_request = -32600;
/// The method is not served.
inline constexpr int method_not_found = -32601;
/// The params do not fit the method.
inline constexpr int invalid_params = -32602;
/// The receiver failed.
inline constexpr int internal_error = -32603;
} // namespace jsonrpc_code

/// What one message is.
enum class message_kind { request, notification, response, error_response };

/// One JSON-RPC message.
struct jsonrpc_message {
  message_kind kind = message_kind::notification;
  /// The id as JSON text (`7` or `"abc"` with its quotes); empty for a notification;
  /// `null` for an error about a request whose id could not be read.
  std::string id;
  /// Requests and notifications: the method.
  std::string method;
  /// Requests and notifications: `params` as JSON text, empty when absent.
  std::string params;
  /// Responses: `result` as JSON text.
  std::string result;
  /// Error responses: `error.code`, `error.message` and `error.data` (JSON text, empty
  /// when absent).
  std::int64_t error_code = 0;
  std::string error_message;
  std::string error_data;

  bool is_request() const noexcept {
    return kind == message_kind::request;
  }
  bool is_response() const noexcept {
    return kind == message_kind::response || kind == message_kind::error_response;
  }
};

/// Parses one message, or a batch (a non-empty array of messages). Fails with
/// parse_error for text that is not JSON and invalid_argument for JSON that is not
/// JSON-RPC 2.0 (no `"jsonrpc":"2.0"`, an id that is neither a string nor an integer, a
/// response with both or neither of result and error, …), naming what is wrong.
expected<std::vector<jsonrpc_message>> parse_jsonrpc(std::string_view text);

/// `{"jsonrpc":"2.0","id":<id_json>,"method":…,"params":<params_json>}`; no params when
/// `params_json` is empty.
std::string write_request(std::string_view id_json, std::string_view method,
                          std::string_view params_json = {});
/// A notification (no id).
std::string write_notification(std::string_view method, std::string_view params_json = {});
/// A success response; `result_json` must be JSON (`{}` for an empty result).
std::string write_result(std::string_view id_json, std::string_view result_json);
/// An error response; `id_json` empty writes `null`.
std::string write_error(std::string_view id_json, std::int64_t code, std::string_view message);

/// The id `n` as JSON text.
std::string id_json(std::int64_t n);

} // namespace troupe::net::mcp
