#pragma once

// The conversation actor's state, shared by the files that implement it:
// conversation.cpp (turns, queue policies, runs), conversation_history.cpp (the history
// kept between turns and what the next prompt would carry), conversation_artifacts.cpp
// (a run's files copied into the files store) and conversation_guard.cpp (the limit on the
// active run, moved by its waits for a human). Private to actors/src.

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "troupe/actors/conversation.hpp"
#include "troupe/actors/shard_scheduler.hpp"

namespace troupe::actors::detail {

/// A message waiting for its run, with everyone who waits for its answer.
struct pending_turn {
  std::string text;
  std::vector<caf::response_promise> waiting;
  /// Get the run's events and (done_atom, run_result).
  std::vector<turn_observer> observers;
  /// The run's id; set when the turn is queued.
  std::string run_id;
  /// The run's row, written with the user message when the turn was accepted (0: not
  /// yet, or a conversation without storage).
  storage::row_id run_row = 0;
  /// The write of the run row and the message is in flight (a turn launched meanwhile
  /// gets its row when it commits).
  bool storing = false;
  /// The turn started as it was accepted: its row is inserted as running (started now),
  /// so its run does not write the status again.
  bool starts_at_once = false;
  /// That write failed, saying this: the turn fails whatever its run did.
  std::optional<std::string> store_failure;
  /// Recovered at start: stored already, and queued as a follow-up under any policy.
  bool recovered = false;
  /// The user messages this turn carries (more than one once others joined it).
  std::size_t messages = 1;
  /// The queue policy it arrived under; unset: the agent's.
  std::optional<queue_policy> policy;
  /// Whose memory its run uses (turn_request::memory_user); a turn others joined keeps
  /// its first message's.
  storage::row_id memory_user = 0;
  /// The stored row of its (first) user message, filled by the write that stores it;
  /// null when another write stored it (a recovered turn).
  storage::message_span message_span;
  /// A run resumed from its paused round (turn_request::resume).
  std::shared_ptr<const run_resume> resume;
};

struct conversation_state {
  conversation_spec spec;
  std::vector<chat_message> history;
  /// Parallel to `history`: the stored rows each message stands for (null: unknown).
  std::vector<storage::message_span> history_spans;
  std::vector<run_event_sink> subscribers;
  /// The active run (launched with its turn, also while the turn's row is written);
  /// invalid between runs.
  run_actor current;
  pending_turn current_turn;
  std::deque<pending_turn> queue;
  std::uint64_t activity = 0;
  std::uint64_t turns = 0;
  std::uint64_t arrivals = 0;
  /// A conversation not yet stored (`spec.unstored`): its row id, filled on the writer's
  /// thread by the write that inserts it, so the writes queued behind that one (which
  /// the writer applies in order) can name it before the conversation learns it.
  std::shared_ptr<storage::row_id> unstored_row;
  /// The active run's guard: its limit is the agent's timeout and a grace, moved by the
  /// time the run waits for a human (its deadline does not count that time either,
  /// issue 19), as its `approval` events tell: calls waiting now, since when, and how long
  /// they waited before. `run_answered`: the run's result (or the guard) ended the turn.
  std::chrono::steady_clock::time_point launched_at{};
  std::size_t human_waits = 0;
  std::optional<std::chrono::steady_clock::time_point> waiting_since;
  std::chrono::steady_clock::duration waited{};
  bool run_answered = false;
};

/// Whether this conversation writes its runs and messages.
inline bool stores(const conversation_state& st) {
  return st.spec.io.writer && (st.spec.conversation_row != 0 || st.unstored_row);
}

using conversation_self = homed_typed_actor<conversation_state, conversation_actor>*;

/// Cuts `history` to `limit` messages, the oldest first; a compression summary and the
/// head before it stay (they stand for everything older). `spans` (parallel) is cut
/// alike (conversation_history.cpp).
void trim_history(std::vector<chat_message>& history, std::vector<storage::message_span>& spans,
                  std::size_t limit);
/// Adds a message to the conversation's history with the stored rows it stands for, then
/// trims the history to its limit (conversation_history.cpp).
void remember(conversation_self self, chat_message m, storage::message_span span);

/// Ends the current turn with `result`: answers its waiters and starts the next turn.
void end_turn(conversation_self self, run_result result);

/// Copies the run's files out of the workspace into the files directory, on the blocking
/// pool, stores a `files` row for each, then ends the turn (conversation_artifacts.cpp).
void store_artifacts(conversation_self self, run_result result);

/// The run of the current turn ended with `result` (conversation.cpp): its history is
/// kept and its files stored, then the turn ends.
void on_run_done(conversation_self self, run_result result);

// conversation_guard.cpp

/// Waits for the run just launched for the current turn: its result goes to
/// `on_run_done`, unless the guard ended the turn first.
void await_run(conversation_self self);
/// Follows the active run's waits for a human (its `approval` events): a pending one
/// (with `timeout_s`) starts a wait, a decision ends one.
void note_approval_event(conversation_state& st, const run_event& e);
/// The guard's timer for `turn`: a run that has not answered by its limit (the agent's
/// timeout and a grace, moved by the time it waited for a human) fails its turn and is
/// cancelled; while it waits for a human, the guard waits too.
void on_guard(conversation_self self, std::uint64_t turn);

} // namespace troupe::actors::detail
