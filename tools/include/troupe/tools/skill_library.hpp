#pragma once

/// \file
/// The node's skills (issue 19): every SKILL.md folder under the configured folders,
/// loaded with `load_skills` (skill.hpp), and the tool source `skills` they make:
///   - the `skill` tool, offered to agents whose `skills` list is not empty: `action:
///     "list"` answers the agent's skills, `action: "read"` one skill's body (the
///     instructions after its front matter), which only then enters the conversation;
///   - one tool per runnable skill that has an `inputSchema` and `scripts.run`, offered to
///     the agents that enable the skill: its script runs in the sandbox with the skill's
///     folder read-only at /skill, the workspace at /work and the call's arguments as
///     JSON on stdin.
/// `reload()` reads the folders again and publishes the new skills as the source's next
/// version (runs keep the set they started with). Thread-safe; `reload` reads files and
/// belongs on the blocking pool.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "troupe/tools/skill.hpp"
#include "troupe/tools/tool_source.hpp"

namespace troupe::tools {

/// The name of the skills' tool source and of the tool that reads skills.
inline constexpr std::string_view skills_source_name = "skills";
inline constexpr std::string_view skill_tool_name = "skill";

struct skill_library_options {
  /// Folders of skill folders, in order (the first defining a name wins).
  std::vector<std::filesystem::path> dirs;
  skill_runners runners = skill_runners::defaults();
  /// The search path for bare program names ($PATH).
  std::string path;
  /// Names a skill's tool may not take (the node's own tools); such a skill is loaded
  /// but is no tool, and says why.
  std::vector<std::string> reserved;
  /// Longest a skill script may run.
  std::chrono::milliseconds timeout{60'000};
};

/// A loaded set, with when it was loaded.
struct skill_snapshot {
  skill_set set;
  /// Increases with every reload; 1 after the first.
  std::uint64_t generation = 0;
};

class skill_library {
public:
  explicit skill_library(skill_library_options options);

  /// The `skills` tool source.
  std::shared_ptr<const tool_source> source() const;
  /// Reads every folder again and publishes what it found. Blocking (file reads).
  std::shared_ptr<const skill_snapshot> reload();
  /// The skills now; never null (empty before the first reload).
  std::shared_ptr<const skill_snapshot> current() const;
  const skill_library_options& options() const noexcept {
    return options_;
  }

private:
  skill_library_options options_;
  std::shared_ptr<dynamic_tool_source> source_;
  mutable std::mutex mutex_;
  std::shared_ptr<const skill_snapshot> current_;
};

/// The compact lines the model sees for `agent`'s skills (one per enabled skill, see
/// `skill_prompt_line`), from the `skill` tool of a resolved snapshot (`skill_tool` is
/// the tool called "skill"; any other tool gives none).
std::vector<std::string> skill_index_lines(const tool& skill_tool, const agent_settings& agent);

} // namespace troupe::tools
