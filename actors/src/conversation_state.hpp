#pragma once

// The conversation actor's state, shared by the files that implement it:
// conversation.cpp (turns, queue policies, runs), conversation_history.cpp (the history
// kept between turns and what the next prompt would carry) and conversation_artifacts.cpp
// (a run's files copied into the files store). Private to actors/src.

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

} // namespace troupe::actors::detail
