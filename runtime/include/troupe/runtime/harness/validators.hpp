#pragma once

/// \file
/// The gates. The run actor asks for a decision at four stages:
///   pre_tool  - before each tool call runs (contract tool policy, loop guard);
///   post_tool - after a tool round (failures become warnings for the next prompt);
///   pre_final - on a final answer candidate (empty, progress-only, plan, evidence,
///               artifacts, JSON shape);
///   pre_save  - just before the final answer is persisted (the same content checks
///               plus file references and referenceable artifacts).
/// A decision is allowed unless it holds a critical violation.

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/runtime/harness/evidence_ledger.hpp"
#include "troupe/runtime/harness/loop_guard.hpp"
#include "troupe/runtime/harness/plan_state.hpp"
#include "troupe/runtime/harness/task_contract.hpp"

namespace troupe::harness {

/// Where in the run a gate sits.
enum class stage { pre_tool, post_tool, pre_final, pre_save };

/// How bad a violation is.
enum class severity {
  /// The step must not proceed: the tool is refused or the answer is corrected.
  critical,
  /// Recorded and shown to the model; the step proceeds.
  warning,
};

/// What a gate found. Each value names one rule; the snake_case name is stable (it is
/// stored in steps and sent in harness events).
enum class violation_code {
  /// pre_tool: the tool is on the contract's blocked list.
  tool_blocked_by_contract,
  /// pre_tool: the tool is not on the contract's allowed list.
  tool_not_allowed_by_contract,
  /// pre_tool: the loop guard refused a repeated or ping-pong call (warning when it only
  /// warns).
  tool_loop_detected,
  /// post_tool (warning): a tool in the round failed.
  tool_failed,
  /// pre_final, pre_save: the answer is empty or white space.
  final_answer_empty,
  /// pre_final, pre_save: the answer only announces work ("I will now …").
  final_answer_incomplete_progress,
  /// pre_final, pre_save: the required plan still has open items.
  plan_not_terminal,
  /// pre_final, pre_save: the bootstrap plan was never advanced and there is no evidence.
  harness_plan_unproven,
  /// pre_final, pre_save: tools failed, nothing succeeded since, and the answer does not
  /// explain the failure.
  no_successful_evidence_after_tool_failure,
  /// pre_final, pre_save: the contract needs tool evidence and no execution tool succeeded.
  tool_evidence_missing,
  /// pre_final, pre_save: fewer artifacts than the contract (or the answer's own claim of
  /// a file) requires.
  required_artifact_missing,
  /// pre_final, pre_save: the answer names a file as delivered that no artifact matches,
  /// or an artifact has no file id, path or URL to reference it by.
  artifact_reference_missing,
  /// pre_save: a file-output answer does not reference every artifact.
  file_output_ref_missing,
  /// pre_final, pre_save: json mode and the answer is not JSON.
  json_output_invalid,
  /// pre_final, pre_save: json mode and the answer holds more than one JSON value.
  json_output_multiple_values,
};

std::string_view to_string(stage s) noexcept;
std::string_view to_string(severity s) noexcept;
std::string_view to_string(violation_code c) noexcept;

/// One finding of a gate.
struct violation {
  violation_code code;
  severity level = severity::critical;
  /// What is wrong, for logs and for the model.
  std::string message;
  /// What the model must do about it, as one imperative sentence.
  std::string required_action;
};

/// A gate's verdict.
struct decision {
  stage at = stage::pre_tool;
  /// False when any violation is critical.
  bool allowed = true;
  std::vector<violation> violations;

  bool has(violation_code code) const noexcept;
  /// The violation codes, in order.
  std::vector<std::string> codes() const;
  /// The distinct required actions, in order.
  std::vector<std::string> required_actions() const;
  /// {"stage","allowed","violation_codes","required_actions","violations":[…]} for
  /// step metadata and harness events.
  std::string to_json() const;
  /// A validation_event for the ledger.
  validation_event to_event(int round) const;
};

/// pre_tool: may `tool` run under `contract`? `loop` is the loop guard's verdict on the
/// same call (check the guard first).
decision validate_pre_tool(const task_contract& contract, std::string_view tool,
                           const loop_verdict& loop = {});

/// post_tool: the calls of one finished round (a span of the ledger's events).
decision validate_post_tool(std::span<const tool_event> round);

/// What a final answer is judged with.
struct final_candidate {
  std::string_view answer;
  /// File names attached by the user (never claimed as deliverables).
  std::span<const std::string> attachments = {};
};

/// pre_final: may this answer end the run?
decision validate_pre_final(const task_contract& contract, const evidence_ledger& ledger,
                            const plan_state& plan, const final_candidate& candidate);

/// pre_save: may this answer be persisted as the run's result? Runs the pre_final checks
/// again (the answer may have been post-processed) plus the file-reference checks.
decision validate_pre_save(const task_contract& contract, const evidence_ledger& ledger,
                           const plan_state& plan, const final_candidate& candidate);

} // namespace troupe::harness
