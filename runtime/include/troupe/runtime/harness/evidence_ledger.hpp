#pragma once

/// \file
/// The evidence ledger: what actually happened in a run, as the gates see it. Tool
/// events (with bounded argument and output summaries), artifacts, plan snapshots,
/// blockers, validation and correction events. The run actor records into it; the
/// validators and the correction policy read it; steps carry its JSON summary.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/runtime/harness/blocker.hpp"
#include "troupe/runtime/harness/outcome.hpp"
#include "troupe/runtime/harness/plan_state.hpp"

namespace troupe::harness {

/// Longest argument summary kept per tool event, in code points.
inline constexpr std::size_t argument_summary_limit = 600;
/// Longest output summary kept per tool event, in code points.
inline constexpr std::size_t output_summary_limit = 1200;

/// `text` cut to at most `max_runes` code points, never inside a UTF-8 sequence; a cut
/// text ends with "…" (counted in the limit). Invalid bytes count as one code point each
/// and are kept as they are.
std::string summarize(std::string_view text, std::size_t max_runes);

/// How a tool call ended.
enum class tool_status {
  /// The tool ran and reported success.
  success,
  /// The tool ran (or tried to) and failed.
  error,
  /// The call was not run because the round was cut short (cancel, earlier failure,
  /// truncated round).
  skipped,
  /// A gate refused the call before it ran (contract, loop guard, unknown tool).
  blocked,
};

std::string_view to_string(tool_status s) noexcept;
/// The status `to_string` names `text`; `error` for any other text (a stored status that is
/// not one is read as a failure, never as a success).
tool_status tool_status_from(std::string_view text) noexcept;

/// One tool call as evidence.
struct tool_event {
  std::string call_id;
  std::string tool;
  /// Summaries are cut to argument_summary_limit / output_summary_limit on record.
  std::string arguments_summary;
  std::string output_summary;
  tool_status status = tool_status::success;
  /// The error text for error and blocked calls.
  std::string error;
  /// For error and blocked calls; classified from `error` on record when left empty.
  std::optional<blocker_kind> failure_kind;
  /// Files the call produced (paths or names).
  std::vector<std::string> files;
  std::chrono::milliseconds duration{0};
  /// The plan item running when the call was made, if any.
  std::string plan_item_id;
  /// The 1-based LLM round that asked for the call.
  int round = 0;

  bool failed() const noexcept {
    return status == tool_status::error || status == tool_status::blocked;
  }
};

/// A file the run delivers.
struct artifact {
  /// Display name ("report.md").
  std::string name;
  /// Where it lives in the workspace or sandbox.
  std::string path;
  /// Stored file id (uuid) once persisted.
  std::string file_id;
  /// Public or API URL, once known.
  std::string url;
  std::string mime;
  std::uint64_t size = 0;
  /// The tool call that produced it, if any.
  std::string call_id;

  /// True when the artifact can be referenced: it has a file id, a path or a URL.
  bool referenceable() const noexcept {
    return !file_id.empty() || !path.empty() || !url.empty();
  }
};

/// A tool failure the answer must deal with.
struct blocker {
  blocker_kind kind = blocker_kind::tool_error;
  std::string tool;
  std::string call_id;
  /// The error, summarized.
  std::string message;

  bool terminal() const noexcept {
    return is_terminal(kind);
  }
};

/// The plan as it stood after a round.
struct plan_snapshot {
  int round = 0;
  std::vector<plan_item> items;
};

/// A gate decision, as recorded.
struct validation_event {
  /// "pre_tool", "post_tool", "pre_final" or "pre_save".
  std::string stage;
  bool allowed = true;
  std::vector<std::string> violation_codes;
  int round = 0;
};

/// A correction the run sent (or gave up on).
struct correction_event {
  /// What triggered it: "final_gate", "progress_only" or "llm_recovery".
  std::string reason;
  /// 1-based attempt number within the shared budget.
  int attempt = 0;
  std::vector<std::string> violation_codes;
  /// False when the budget was spent and the run failed instead.
  bool sent = true;
  int round = 0;
};

/// The record of one run's evidence. Not thread-safe: owned by the run actor.
class evidence_ledger {
public:
  /// Records a tool call: cuts its summaries, classifies a failure left unclassified,
  /// and records a blocker for error and blocked calls.
  void record_tool(tool_event event);
  void add_artifact(artifact file);
  void snapshot_plan(const plan_state& plan, int round);
  void record_blocker(blocker b);
  void record_validation(validation_event event);
  void record_correction(correction_event event);

  const std::vector<tool_event>& tool_events() const noexcept {
    return tool_events_;
  }
  const std::vector<artifact>& artifacts() const noexcept {
    return artifacts_;
  }
  const std::vector<plan_snapshot>& plan_snapshots() const noexcept {
    return plan_snapshots_;
  }
  const std::vector<blocker>& blockers() const noexcept {
    return blockers_;
  }
  const std::vector<validation_event>& validation_events() const noexcept {
    return validation_events_;
  }
  const std::vector<correction_event>& corrections() const noexcept {
    return corrections_;
  }

  /// Calls of tools that do work (everything but plan, tool_search and finish).
  std::size_t execution_call_count() const noexcept;
  /// Successful calls of execution tools.
  std::size_t successful_execution_count() const noexcept;
  /// Failed (error or blocked) calls of execution tools.
  std::size_t failed_execution_count() const noexcept;
  /// True when an execution tool succeeded, or an artifact exists.
  bool has_successful_evidence() const noexcept;
  /// True when an execution tool failed and no execution tool succeeded after the last
  /// such failure.
  bool failure_without_later_success() const noexcept;
  bool has_terminal_blocker() const noexcept;
  /// Artifacts that can be referenced (see artifact::referenceable).
  std::size_t referenceable_artifact_count() const noexcept;
  /// What the evidence alone says: success (successes, no blockers), partial (successes
  /// and blockers), blocked (terminal blockers only), or unknown.
  outcome evidence_outcome() const noexcept;
  /// Distinct tool names in first-use order with their call counts.
  std::vector<std::pair<std::string, std::size_t>> tools_used() const;

  /// A compact JSON object for step metadata: counts, tools used, artifacts, blockers.
  std::string summary_json() const;

private:
  std::vector<tool_event> tool_events_;
  std::vector<artifact> artifacts_;
  std::vector<plan_snapshot> plan_snapshots_;
  std::vector<blocker> blockers_;
  std::vector<validation_event> validation_events_;
  std::vector<correction_event> corrections_;
};

} // namespace troupe::harness
