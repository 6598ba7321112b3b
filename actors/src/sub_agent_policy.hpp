#pragma once

/// \file
/// Private to the run actor: what a sub-agent may do, as data. The tool round reads
/// these tables and nothing else decides: a new mode is a row in `sub_agent_modes`, a
/// deeper tree a change of `sub_agent_depth`.

#include <array>
#include <chrono>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/actors/run.hpp"
#include "troupe/tools/tool.hpp"

namespace troupe::actors::detail {

/// What a child run started in one mode (the `mode` of a sub_agent task) may call.
struct sub_agent_mode {
  std::string_view name;
  /// True: the child may call only `allowed_tools` among the registry's tools and the
  /// plan tool (`finish` always stays). False: every tool the agent has.
  bool restricted = false;
  std::span<const std::string_view> allowed_tools;
};

inline constexpr std::array<std::string_view, 4> explore_mode_tools{"read", "grep", "find", "ls"};
inline constexpr std::array<std::string_view, 3> shell_mode_tools{"exec", "read", "ls"};

/// The modes; the first is the default, for a task without a mode or with an unknown one.
inline constexpr std::array<sub_agent_mode, 3> sub_agent_modes{{
    {"general", false, {}},
    {"explore", true, explore_mode_tools},
    {"shell", true, shell_mode_tools},
}};

/// How deep sub-agents nest and how children are started.
struct sub_agent_rules {
  /// A run at this depth or deeper may not start sub-agents (the pre-tool gate refuses).
  int max_depth = max_run_depth;
  /// Whether child runs are offered `sub_agent` themselves. False: only top-level runs
  /// delegate; `max_depth` backs this up for runs spawned with sub_agent allowed.
  bool children_delegate = false;
  /// How long a parent waits for a child beyond the child's own deadline.
  std::chrono::seconds child_grace{10};
  /// The system prompt a child runs under (instead of the agent's).
  std::string_view child_system_prompt =
      "You are a sub-agent. Do the task you are given and answer with its result.";
};

inline constexpr sub_agent_rules sub_agent_policy{};

/// The mode named `name`; the default mode when there is none of that name.
constexpr const sub_agent_mode& find_sub_agent_mode(std::string_view name) {
  for (const auto& mode : sub_agent_modes) {
    if (mode.name == name) {
      return mode;
    }
  }
  return sub_agent_modes.front();
}

/// The tools a child run in `mode` is blocked from, in the snapshot's order, then the
/// control tools.
std::vector<std::string> child_blocked_tools(const sub_agent_mode& mode,
                                             const tools::tool_snapshot& tools,
                                             const sub_agent_rules& rules = sub_agent_policy);

} // namespace troupe::actors::detail
