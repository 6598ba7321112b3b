#pragma once

/// \file
/// Approval rules (issue 19): which tool calls wait for a human before they run. A tool
/// or skill is world-acting by configuration: `approval = "never" | "agent_initiated" |
/// "always"` on a `[[tools]]` entry or in a skill's front matter; an agent overrides it
/// per tool with an inline table (`approval = { code_interpreter = "always" }`) and may
/// take the strict profile (`approval_profile = "strict"`: code_interpreter, exec and
/// write-capable HTTP tools are agent_initiated).
///
/// "agent_initiated" means the call waits for approval unless the user asked for it
/// themselves. troupe decides that from the words of the user's latest message (the
/// run's objective): the user asked for the tool when that message names it, the tool's
/// name appearing as a whole word, case-insensitively, with `_` and `-` matching a space
/// too ("run code_interpreter", "use the code interpreter", "exec: ls"). A tool the
/// message does not name was the agent's own initiative. Pure: no I/O.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "troupe/runtime/error.hpp"

namespace troupe {

/// When a call of a tool needs a human's approval.
enum class approval_mode {
  /// Never: the call runs.
  never,
  /// Unless the user's latest message asked for the tool.
  agent_initiated,
  /// Every call.
  always,
};

std::string_view to_string(approval_mode m) noexcept;
/// "never", "agent_initiated" or "always"; the error names the accepted values.
expected<approval_mode> parse_approval_mode(std::string_view text);

/// The agent's approval profiles: "" (none) or "strict".
expected<void> check_approval_profile(std::string_view profile);

/// How long a pending approval waits before it counts as a denial, by default.
inline constexpr std::chrono::seconds default_approval_timeout{600};

/// What decides one tool's approval mode.
struct approval_inputs {
  /// The tool's name.
  std::string_view tool;
  /// The tool's own setting (a `[[tools]]` entry's or a skill's `approval`); unset: none.
  std::optional<approval_mode> tool_default;
  /// The agent's per-tool table (`approval = { tool = "mode" }`), or null.
  const std::map<std::string, approval_mode, std::less<>>* agent_overrides = nullptr;
  /// The agent's `approval_profile` ("" or "strict").
  std::string_view profile;
  /// The tool can change something in the world over HTTP (an HTTP custom tool whose
  /// method is not GET or HEAD); the strict profile makes such a tool agent_initiated.
  bool writes_over_http = false;
};

/// The mode for one tool: the agent's table first, then the tool's own setting, then the
/// strict profile's rule, else never.
approval_mode approval_for(const approval_inputs& in) noexcept;

/// True when `user_message` names `tool` (see the file comment).
bool user_asked_for(std::string_view tool, std::string_view user_message) noexcept;

/// True when a call of a tool whose mode is `mode` must wait for a human, the user's
/// latest message being `user_message`.
bool needs_approval(approval_mode mode, std::string_view tool,
                    std::string_view user_message) noexcept;

} // namespace troupe
