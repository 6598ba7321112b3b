#pragma once

/// \file
/// Private to the run actor: the state one run keeps and the functions its files share.
/// The run is split by subject, every file working on this one state inside the actor:
///   run.cpp              the behavior: start, deadline, cancellation, the end of a run
///   run_llm_round.cpp    LLM rounds: the request, streamed deltas, reading the outcome
///   run_tool_round.cpp   tool rounds: the pre-tool gate, batches, results, the round's end
///   run_sub_agents.cpp   sub_agent calls: child runs under the mode policy
///                        (sub_agent_policy.hpp)
///   run_gates.cpp        the final-answer gates and corrections
///   run_plan_tool.cpp    the plan tool, executed inside the actor
///   run_persistence.cpp  events to the subscriber, steps and messages to the writer
///   run_memory.cpp       the memory block: recall before the first round, `used` evidence
///   run_compression.cpp  context compression before a round: pruning, the summary call,
///                        the stored summary (issue 16)
/// Only the coroutines (the LLM call, the tools) run elsewhere: on the io executor,
/// started through the bridge, with everything they need passed as parameters.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/all.hpp>

#include "troupe/actors/bridge.hpp"
#include "troupe/actors/run.hpp"
#include "troupe/actors/shard_scheduler.hpp"
#include "troupe/actors/tool_call.hpp"
#include "troupe/runtime/harness/correction_policy.hpp"
#include "troupe/runtime/harness/loop_guard.hpp"
#include "troupe/runtime/harness/plan_state.hpp"
#include "troupe/runtime/harness/task_contract.hpp"
#include "troupe/runtime/harness/validators.hpp"
#include "troupe/runtime/prompt/context_blocks.hpp"
#include "troupe/tools/argument_validator.hpp"

namespace troupe::actors::detail {

/// One tool call of the current round, from the gate to its result.
struct call_slot {
  tool_call call;
  std::shared_ptr<const tools::tool> impl;
  /// Runs on the io executor (false: decided inside the actor).
  bool execute = false;
  bool concurrency_safe = false;
  bool done = false;
  tools::tool_result result;
  harness::tool_status status = harness::tool_status::success;
  std::chrono::steady_clock::time_point started;
  std::chrono::milliseconds duration{0};
  /// sub_agent: children still running and their answers in task order.
  std::size_t children_pending = 0;
  std::vector<std::string> child_answers;
  std::vector<bool> child_ok;
  /// Issue 19: the approval the call waits for (empty: none), and whether a human
  /// approved it (it then runs without asking again).
  std::string approval_id;
  bool approved = false;
  /// The call was started (start_call): it runs, or waits for its approval.
  bool launched = false;
};

/// The outcome of a final gate.
struct gate_result {
  enum class kind { accepted, retry, failed };
  kind what = kind::accepted;
  /// accepted: the answer as delivered; retry: the correction prompt; failed: the message.
  std::string text;
};

/// Makes a write of the run from its rows (run, conversation), once they are known.
using row_write =
    std::function<storage::write_op(storage::row_id run, storage::row_id conversation)>;

struct run_state {
  run_spec spec;
  run_event_sink subscriber;
  harness::task_contract contract;
  harness::evidence_ledger ledger;
  harness::plan_state plan;
  harness::correction_budget budget;
  harness::loop_guard guard;
  std::shared_ptr<net::provider_client> client;
  std::vector<chat_message> messages;
  /// Parallel to `messages`: the stored rows each stands for (null: not stored). Kept in
  /// step by `add_message`; compression reads it to record its summary's range.
  std::vector<storage::message_span> spans;
  std::vector<tool_definition> tool_defs;
  /// The run's tools, resolved once when it starts (sub-agents share their parent's).
  std::shared_ptr<const tools::tool_snapshot> tools;
  /// The context blocks of the system message (the plan state, later memory).
  prompt::context_blocks blocks;
  /// Where the objective is in `messages`: it is never cut from the prompt.
  std::size_t objective_index = 0;
  /// What the tool definitions cost of the context window (estimated once).
  std::size_t tool_tokens = 0;
  /// Messages the last round's prompt left out (a step is recorded when it changes).
  std::size_t dropped_messages = 0;
  /// Context compression (run_compression.cpp): a summary call is in flight; the
  /// summariser failed in this run (it is not asked again, pruning goes on); the prompt
  /// was compressed (the result carries the history).
  bool summarising = false;
  bool summariser_failed = false;
  bool compressed = false;
  /// Called once the pending run row is known (true) or failed (false), after the
  /// deferred writes were sent.
  std::vector<std::function<void(bool)>> row_waiters;
  std::map<std::string, tools::argument_schema, std::less<>> schemas;
  std::string model;
  bool on_fallback = false;
  int round = 0;
  /// When the current round's request went out (ms since the epoch): its llm_round step
  /// says when it started and how long it took (the console's timeline).
  std::int64_t round_started_at = 0;
  int llm_calls = 0;
  std::uint64_t seq = 0;
  bool started = false;
  bool finished = false;
  /// A write of this run failed after it finished: its result must not say succeeded.
  std::optional<std::string> persistence_error;
  /// While the run row is pending (`spec.row_pending`): the writes made so far, built
  /// once the row id is known, and whether the run's outcome waits for it too.
  std::vector<row_write> deferred_writes;
  bool outcome_waits_for_row = false;
  bool candidate_streamed = false;
  caf::response_promise promise;
  std::map<std::uint64_t, io_task> inflight;
  std::uint64_t next_task = 0;
  /// Sub-agent runs and tool calls in flight, cancelled when the run ends.
  std::vector<run_actor> child_runs;
  std::vector<tool_call_actor> tool_calls;
  /// User messages steered into the run, for the next LLM round.
  std::vector<std::string> steered;
  std::vector<call_slot> calls;
  std::size_t next_call = 0;
  std::size_t running_calls = 0;
  run_result result;
  /// The deadline (`agent.timeout`) does not count the time the run waits for a human
  /// (issue 19): when it started, since when it waits (unset: it does not), how long it
  /// waited before, and whether the deadline came while it waited.
  std::chrono::steady_clock::time_point started_at{};
  std::optional<std::chrono::steady_clock::time_point> waiting_since;
  std::chrono::steady_clock::duration waited{};
  bool deadline_due = false;
};

/// The run actor as its own code sees it.
using run_self = homed_typed_actor<run_state, run_actor>*;

/// Adds a message to the run's conversation with the stored rows it stands for.
inline void add_message(run_state& st, chat_message m, storage::message_span span = {}) {
  st.spans.resize(st.messages.size());
  st.messages.push_back(std::move(m));
  st.spans.push_back(std::move(span));
}

// -- run.cpp: the run's end ------------------------------------------------------------

/// Ends the run once: cancels what is in flight, publishes the final event, makes the
/// status durable, then answers the starter and quits.
void finish_run(run_self self, storage::run_status status, std::string text, std::string error);
/// Makes the finished run's status durable (when it persists), then answers its caller
/// and quits.
void report_outcome(run_self self);
void fail_run(run_self self, std::string message);
void complete_run(run_self self, std::string text);
/// Keeps a started I/O operation for cancellation; returns its key in `inflight`.
std::uint64_t track(run_self self, io_task task);
/// Cancels what is in flight: the LLM stream, tool calls (their processes are killed),
/// child runs.
void cancel_inflight(run_self self);

// -- run_llm_round.cpp -----------------------------------------------------------------

/// Starts the next LLM round (or fails the run at its round limit).
void next_round(run_self self);
/// A batch of streamed text of `round`, published as a candidate delta.
void on_delta(run_self self, int round, std::string text);

// -- run_tool_round.cpp ----------------------------------------------------------------

/// Runs the tool calls of the current round; the next LLM round follows (or the run ends).
void run_tool_round(run_self self, std::vector<tool_call> calls);
void settle(call_slot& slot, tools::tool_result result, harness::tool_status status);
/// A call has its result (executed calls: announces it and starts the next batch).
void on_call_done(run_self self, std::size_t index);

/// Starts the call at `index` in its own tool_call actor (after any approval).
void launch_call(run_self self, std::size_t index);
/// Goes on with the round's calls not started yet (a resumed round), or ends the round.
void continue_round(run_self self);

// -- run_approvals.cpp -----------------------------------------------------------------

/// True (with the reason) when the call at `index` must wait for a human first: the
/// tool's approval mode for this agent (approval.hpp) against the run's objective.
bool approval_needed(run_self self, std::size_t index, std::string& reason);
/// Stores a pending approval for the call at `index`, then announces it (step, SSE
/// event `approval`) and arms its deadline. The call stays running meanwhile; nothing
/// else of the run moves until it is decided.
void request_approval(run_self self, std::size_t index, std::string reason);
/// A decision arrived (approve: the tool runs; deny: policy_blocked).
void on_approval(run_self self, const std::string& id, bool approved, std::string note,
                 std::int64_t decided_by);
/// The deadline of approval `id` passed: denied, unless a decision came first.
void on_approval_expired(run_self self, const std::string& id);
/// The run ends: approvals still waiting expire.
void abandon_approvals(run_self self);
/// Whether a call of the round waits for a human's decision.
bool waits_for_human(const run_state& st);
/// Saves the round (its calls and their state) on the run's pending approvals, so that a
/// restart can resume it; and notes when a wait for a human began or ended.
void save_round(run_self self);
/// The run's deadline arrived: it ends the run, unless the run waits for a human (it is
/// put off until the wait ends) or waited (it is moved by the time waited).
void on_deadline(run_self self);
/// The node stops: a run that waits for a human quits leaving its rows (running, the
/// approvals pending, the round saved) for the next start; any other run is cancelled.
void on_shutdown(run_self self);
/// A resumed run (spec.resume) goes on with its paused round: calls done keep their
/// results, calls that ran when the node stopped end as interrupted, calls that wait for
/// a human wait again (or take the decision made meanwhile), the rest run.
void resume_round(run_self self);

// -- run_sub_agents.cpp ----------------------------------------------------------------

/// Starts one child run per task of the sub_agent call at `index`; settles the call at
/// once when its tasks are unusable.
void start_sub_agents(run_self self, std::size_t index);

// -- run_gates.cpp ---------------------------------------------------------------------

/// Runs the final gates (pre-final, then pre-save) on an answer.
gate_result final_gate(run_self self, const std::string& answer);
/// Records a harness decision as a step and publishes it.
void harness_step(run_self self, const std::string& name, std::string data_json, bool allowed);
/// Tells subscribers to discard the candidate text streamed since the last correction.
void retract_candidate(run_self self, const std::vector<std::string>& codes);

// -- run_plan_tool.cpp -----------------------------------------------------------------

/// The plan as the plan tool answers it.
std::string plan_json(const harness::plan_state& plan);
/// Executes the `plan` tool against the run's plan.
tools::tool_result run_plan_tool(harness::plan_state& plan, std::string_view arguments);

// -- run_memory.cpp --------------------------------------------------------------------

/// Recalls the user's memories into the memory block (when the run has memory), writes a
/// `used` evidence row per item, then starts the first LLM round. A failed recall is
/// logged and the run goes on without the block.
void recall_memory(run_self self);

// -- run_compression.cpp ---------------------------------------------------------------

/// What a compression did, for its caller.
struct compression_done {
  /// The middle was summarised (and the summary stored).
  bool summarised = false;
  /// Tool outputs pruned.
  std::size_t pruned = 0;
  std::size_t tokens_before = 0;
  std::size_t tokens_after = 0;
  std::size_t messages_covered = 0;
  std::size_t summary_tokens = 0;
  std::size_t summary_chars = 0;
  /// Why nothing was summarised: the plan's reason, or the summariser's failure.
  std::string skipped;
};

/// Compresses the prompt's history when the plan says so (always with `force`, for
/// `/compact`): prunes old tool outputs, then has the agent's fast model summarise the
/// middle, stores the summary and only then replaces the middle with it. `then` runs
/// once that is done (at once when no summary is needed); a failure leaves the history
/// as it was (pruned) and is a recorded step.
void compress_context(run_self self, bool force, std::function<void(compression_done)> then);
/// The system note's slot, set while the history holds a summary.
void note_compression(run_state& st);

// -- run_persistence.cpp ---------------------------------------------------------------

/// Sends the subscriber the run's next event.
void publish(run_self self, run_event_type type, std::string data_json,
             std::string harness_name = {});
/// Queues a write (dropped when the run is not persisted).
void write(run_self self, storage::write_op op);
/// Writes the op `make(run_row, conversation_row)`: now when the run row is known, after
/// it is written while it is pending, never when the run is not persisted.
void write_with_row(run_self self, row_write make);
/// The pending run row arrived (0: its write failed): sends the deferred writes.
void on_run_row(run_self self, storage::row_id row, storage::row_id conversation);
/// Whether the run persists what it does (a writer, and a run row known or pending).
bool persists(const run_state& st);
void record_step(run_self self, std::string kind, std::string name, std::string status,
                 std::string input_json, std::string output_json);
/// Stores a message of the run; returns its span, filled by the write (null when the run
/// stores nothing).
storage::message_span persist_message(run_self self, const chat_message& m,
                                      const token_usage* usage = nullptr);
/// Persists a message and adds it to the run's conversation.
void push_message(run_self self, chat_message m);
std::string tool_calls_json(const std::vector<tool_call>& calls);

} // namespace troupe::actors::detail
