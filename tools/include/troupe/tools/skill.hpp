#pragma once

/// \file
/// Skills: folders holding a `SKILL.md`, whose YAML front matter (between `---` lines)
/// says what the skill is and whose body (the Markdown after it) is the instructions the
/// model loads on demand. The front matter keys read:
///
///     name: run_code                 # required; a tool name (letters, digits, _ and -)
///     description: "…"               # required
///     version: "1.0.0"
///     triggers: [code, script]
///     inputSchema: {type: object, …} # with scripts.run: the skill is also a tool
///     scripts: {run: scripts/run.py} # run with the input as JSON on stdin
///     requires: {bins: [node]}       # also read under metadata.<vendor>.requires
///     approval: never                # never | agent_initiated | always
///
/// Parsing is pure (no I/O): a problem is reported with the file and the line it is on,
/// never thrown.

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/runtime/error.hpp"

namespace troupe::tools {

/// A SKILL.md that could not be used, and where.
struct skill_problem {
  std::filesystem::path file;
  /// 1-based line in `file`; 0 when the problem is not on a line (a missing file).
  std::size_t line = 0;
  std::string message;

  /// `file:line: message`.
  std::string to_string() const;
};

/// One parsed skill.
struct skill {
  std::string name;
  std::string description;
  std::string version;
  std::vector<std::string> triggers;
  /// The instructions after the front matter.
  std::string body;
  /// The skill's folder and its SKILL.md.
  std::filesystem::path dir;
  std::filesystem::path file;
  /// `inputSchema` as JSON text; empty when the skill has none.
  std::string input_schema;
  /// `scripts.run`, relative to `dir`; empty when the skill has none.
  std::string run_script;
  /// `requires.bins`: programs that must be on the machine.
  std::vector<std::string> required_bins;
  /// `approval`: never | agent_initiated | always; empty when the skill says nothing.
  std::string approval;
  /// Whether the skill can run as a tool, and why not when it cannot (a missing runner
  /// for its script's extension, a missing required binary, a missing script).
  bool runnable = false;
  std::string unavailable_reason;

  /// True when the skill is a tool (an input schema and a run script).
  bool is_tool() const noexcept {
    return !input_schema.empty() && !run_script.empty();
  }
};

/// Parses `text`, the content of `file` (a SKILL.md in folder `file.parent_path()`).
/// Availability is not decided here (see `check_skill`).
tl::expected<skill, skill_problem> parse_skill(const std::filesystem::path& file,
                                               std::string_view text);

/// How scripts are run, by extension without the dot: the built-in python (`py`),
/// javascript (`js`, `mjs`, `cjs`) and bash (`sh`) runners, and any the config names
/// (`skills.runners.<ext>`, a command such as "/usr/bin/node --experimental-strip-types").
struct skill_runners {
  std::map<std::string, std::vector<std::string>, std::less<>> by_extension;

  /// The built-in runners.
  static skill_runners defaults();
  /// The command for `script`'s extension, or null.
  const std::vector<std::string>* find(const std::filesystem::path& script) const;
};

/// Decides whether `s` is runnable: its script exists, a runner knows its extension and
/// the runner's program and every required binary are found (`path` is the search path
/// for bare names, as in $PATH). Sets `runnable` and `unavailable_reason`. Reads the
/// file system.
void check_skill(skill& s, const skill_runners& runners, std::string_view path);

/// The skills found in `dirs` (each a folder of skill folders) and the problems met.
struct skill_set {
  /// By name; a name found twice keeps the first and reports the second.
  std::vector<skill> skills;
  std::vector<skill_problem> problems;

  const skill* find(std::string_view name) const noexcept;
};

/// Loads every `<dir>/<folder>/SKILL.md` under `dirs` (a missing dir is no problem: it
/// may be made later), checked against `runners` and `path`. Reads the file system;
/// never throws.
skill_set load_skills(const std::vector<std::filesystem::path>& dirs, const skill_runners& runners,
                      std::string_view path);

/// The one line the model sees for `s`: `- name: description (triggers: a, b)`.
std::string skill_prompt_line(const skill& s);

} // namespace troupe::tools
