#pragma once

/// \file
/// Why a tool call failed, in the terms the gates reason with: a terminal blocker
/// (retrying will not help; the answer must explain it) or a recoverable one (retry or
/// try another way).

#include <optional>
#include <string_view>

namespace troupe::harness {

/// The kind of a tool failure.
enum class blocker_kind {
  /// The resource or action is forbidden to this agent (403, EACCES). Terminal.
  permission_denied,
  /// Credentials are missing or rejected (401). Terminal.
  auth_failed,
  /// The harness contract, sandbox or a policy refused the call. Terminal.
  policy_blocked,
  /// The tool, file or resource does not exist (404, ENOENT). Terminal.
  not_found,
  /// The service throttled the call (429). Recoverable.
  rate_limited,
  /// The call ran out of time (408, 504, deadline). Recoverable.
  timeout,
  /// Any other failure. Recoverable.
  tool_error,
};

std::string_view to_string(blocker_kind k) noexcept;
/// The kind named `name` (as `to_string` writes it), or nullopt.
std::optional<blocker_kind> parse_blocker_kind(std::string_view name) noexcept;

/// True for permission_denied, auth_failed, policy_blocked and not_found.
bool is_terminal(blocker_kind k) noexcept;

/// The kind an HTTP status tells on its own (401, 403, 404, 408, 410, 429, 451, 504),
/// or nullopt for a status that says nothing more than "failed".
std::optional<blocker_kind> blocker_of_status(int http_status) noexcept;

/// Classifies a failure from the tool's error text and, when the tool talked HTTP, its
/// status code. The status decides when it is telling (401, 403, 404, 408, 410, 429,
/// 451, 504); otherwise English and Chinese phrases in the text decide; otherwise
/// tool_error. A call the harness itself refused (`refused_by_harness`) is
/// policy_blocked unless the text says more.
blocker_kind classify_failure(std::string_view error_text, std::optional<int> http_status = {},
                              bool refused_by_harness = false);

/// What the model should do about a blocker, as one imperative sentence.
std::string_view required_action(blocker_kind k) noexcept;

} // namespace troupe::harness
