#pragma once

/// \file
/// The event stream of one agent run: what subscribers (SSE clients, the CLI) see while
/// a run is in flight. Every event carries the schema version, the run id, the turn id,
/// a per-run sequence number and a timestamp. Text deltas are *candidate* text: when the
/// final gate rejects the candidate, a model.correction event tells subscribers to
/// discard what they received since the last correction.

#include <cstdint>
#include <string>
#include <string_view>

namespace troupe {

/// The version of the event schema; bumped when a field changes meaning.
inline constexpr int run_event_version = 1;

/// What an event reports.
enum class run_event_type {
  /// The run began (data: agent, model, objective).
  run_started,
  /// The run ended with an accepted answer (data: text, usage, rounds).
  run_completed,
  /// The run ended without an accepted answer (data: error).
  run_failed,
  /// The run was cancelled or ran out of time (data: reason).
  run_cancelled,
  /// More candidate answer text (data: text, round).
  model_delta,
  /// The gate rejected the candidate text: discard it (data: round, violation codes).
  model_correction,
  /// A tool call starts (data: call id, tool, arguments).
  action_started,
  /// A tool call ended (data: call id, tool, status, output summary).
  action_finished,
  /// A harness decision; the name is the step name (validate_pre_final, …).
  harness,
  /// Earlier turns of the prompt were summarised (data: round, tokens_before,
  /// tokens_after, messages_covered, summary_tokens, model, updated_previous).
  context_compressed,
  /// A tool call waits for a human's approval (issue 19; data: id, tool, arguments,
  /// reason, call_id, timeout_s), or its approval was decided (data: id, tool, decision,
  /// decided_by, note).
  approval,
};

/// One event.
struct run_event {
  int version = run_event_version;
  std::string run_id;
  std::string turn_id;
  /// 1, 2, 3, … per run, in the order the run published them.
  std::uint64_t seq = 0;
  run_event_type type = run_event_type::run_started;
  /// For harness events: validate_<stage>, correct_<stage>, continue_execution,
  /// recover_llm_round, bootstrap_plan.
  std::string harness_name;
  /// Milliseconds since the Unix epoch.
  std::int64_t created_at = 0;
  /// The payload, a JSON object as text.
  std::string data_json = "{}";

  /// The type as sent on the wire: "run.started", "model.delta", "harness.<name>", ….
  std::string type_name() const;
  /// `{"version":1,"run_id":…,"turn_id":…,"seq":…,"type":…,"created_at":…,"data":{…}}`.
  std::string to_json() const;
};

/// The wire name of a non-harness type ("run.started", …; "harness" for harness).
std::string_view to_string(run_event_type t) noexcept;

/// Milliseconds since the Unix epoch, for event and record timestamps.
std::int64_t unix_millis_now() noexcept;
/// Seconds since the Unix epoch (link expiries, OpenAI `created`).
std::int64_t unix_seconds_now() noexcept;

} // namespace troupe
