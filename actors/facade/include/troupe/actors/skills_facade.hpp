#pragma once

/// \file
/// The skills facade: what the HTTP layer may read of the node's skills (issue 19)
/// without seeing the tools layer: every loaded skill with its availability, and every
/// SKILL.md that could not be loaded with its file and line. Implemented in actors/
/// (node_skills.cpp).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace troupe::actors {

/// One loaded skill.
struct skill_info {
  std::string name;
  std::string description;
  std::string version;
  std::vector<std::string> triggers;
  /// Its SKILL.md and folder.
  std::string file;
  std::string dir;
  /// The instructions after the front matter.
  std::string body;
  /// `inputSchema` as JSON text (empty: none) and `scripts.run` (empty: none).
  std::string input_schema;
  std::string run_script;
  std::vector<std::string> required_bins;
  /// `approval` from the front matter; empty when it says nothing.
  std::string approval;
  /// True when the skill is offered as a tool of its own (an input schema, a script
  /// and everything it needs on this machine).
  bool tool = false;
  /// False with `reason` when something it needs is missing (a runner, a binary, its
  /// script); a skill without a script is available as instructions.
  bool available = true;
  std::string reason;
};

/// A SKILL.md that could not be loaded.
struct skill_problem_info {
  std::string file;
  /// 1-based; 0 when the problem is not on a line.
  std::size_t line = 0;
  std::string message;
};

/// The skills now.
struct skills_view {
  /// Increases with every reload.
  std::uint64_t generation = 0;
  /// The folders read, in order.
  std::vector<std::string> dirs;
  std::vector<skill_info> skills;
  std::vector<skill_problem_info> problems;
};

class skills_facade {
public:
  virtual ~skills_facade() = default;
  /// The skills as last loaded (a copy; cheap enough for an API read).
  virtual skills_view current() const = 0;
};

} // namespace troupe::actors
