#pragma once

/// \file
/// The task contract: what a run has to deliver, derived once at the start of a run from
/// the objective text, the agent's tools and the attachments. Every later gate checks
/// the run against it. Derivation is keyword-driven and deterministic (see README.md in
/// runtime/src/harness for the exact rules).

#include <string>
#include <string_view>
#include <vector>

namespace troupe::harness {

/// How much structure the task needs.
enum class task_complexity {
  /// A question or small request: no plan, no evidence requirements.
  simple,
  /// Work with inputs or outputs (attachments, files, tools) but no multi-step plan.
  normal,
  /// Multi-step work (implement, fix, investigate, …): a plan when the agent has one.
  complex,
};

/// The form of the deliverable.
enum class output_mode {
  /// A text answer.
  text,
  /// Exactly one JSON value and nothing else.
  json,
  /// One or more files (artifacts) referenced by the answer.
  file,
  /// Files plus a substantive text answer (summary, explanation).
  mixed,
};

std::string_view to_string(task_complexity c) noexcept;
std::string_view to_string(output_mode m) noexcept;

/// Which tools the run may call. A blocked tool is refused even when allowed; an empty
/// allowed list means "no restriction beyond the blocked list".
struct tool_policy {
  std::vector<std::string> allowed;
  std::vector<std::string> blocked;

  bool is_blocked(std::string_view tool) const noexcept;
  bool is_allowed(std::string_view tool) const noexcept;
};

/// The facts a contract is derived from.
struct contract_input {
  /// The user's message for this run.
  std::string objective;
  /// Names of the tools the agent may call (the agent's configured tool list).
  std::vector<std::string> agent_tools;
  /// File names attached to the message (inputs, never counted as deliverables).
  std::vector<std::string> attachments;
  /// Tools blocked from outside the objective (sub-agent mode and depth limits).
  std::vector<std::string> blocked_tools;
  /// The request set a JSON response format.
  bool response_format_json = false;
  /// The run is a sub-agent task: never bootstraps a plan.
  bool sub_agent = false;
  /// The caller demands a plan regardless of the objective.
  bool force_plan = false;
  /// Correction budget for the run; values below 0 mean the default.
  int max_correction_attempts = -1;
};

/// The default correction budget: shared by final-gate corrections, progress-only
/// continuation and LLM-round recovery.
inline constexpr int default_correction_attempts = 2;

/// What the run must deliver and how the gates judge it.
struct task_contract {
  std::string objective;
  task_complexity complexity = task_complexity::simple;
  output_mode mode = output_mode::text;
  /// Files the answer must deliver; at least 1 in file and mixed mode.
  int required_artifact_count = 0;
  /// Lower-cased names of the files the objective asks for ("report.md"), if it names them.
  std::vector<std::string> requested_files;
  /// A plan is bootstrapped and must be terminal before the final answer.
  bool require_plan = false;
  /// The answer must rest on at least one successful execution-tool call.
  bool require_tool_evidence = false;
  /// The answer must not be empty (always true today; kept explicit for the gates).
  bool require_final_answer = true;
  tool_policy tools;
  int max_correction_attempts = default_correction_attempts;

  bool expects_files() const noexcept {
    return mode == output_mode::file || mode == output_mode::mixed;
  }
  /// True when the plan template includes a validate step.
  bool requires_validation_step() const noexcept;
};

/// Derives the contract. Pure and deterministic: the same input gives the same contract.
task_contract build_contract(const contract_input& input);

/// Tools that do not count as evidence of work: plan bookkeeping, tool discovery and
/// the explicit final answer.
bool is_bookkeeping_tool(std::string_view tool) noexcept;

} // namespace troupe::harness
