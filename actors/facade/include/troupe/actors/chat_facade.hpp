#pragma once

/// \file
/// The chat facade: what the HTTP layer may do with agent runs, without seeing an actor.
/// A submitted run is named by a `run_ticket`: its public ids and an opaque handle that
/// keeps the run's journal reachable for as long as the ticket lives (a run that ended
/// can still be waited on or replayed through its ticket, whatever the retention).
/// Implemented in actors/ over the chat service (service_facades.hpp).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "troupe/actors/journal_entry.hpp"
#include "troupe/actors/prompt_context.hpp"
#include "troupe/actors/run_result.hpp"
#include "troupe/net/http_server.hpp"
#include "troupe/runtime/agent_config.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/error.hpp"
#include "troupe/storage/records.hpp"

namespace troupe::actors {

/// A run resumed after a restart (run.hpp); built and read in actors/ only.
struct run_resume;

/// A message to submit, its caller resolved.
struct chat_submission {
  storage::row_id user_id = 0;
  /// The conversation (existing, or just created for this message).
  storage::conversation_record conversation;
  std::string text;
  /// The `done` entry's data for this run (the API adds signed links); may be empty.
  std::function<std::string(const run_result&)> final_data;
  /// A run accepted before the process stopped and not started (start-up recovery): its
  /// id and row, already stored with its message. Empty and 0 for a new message.
  std::string run_id;
  storage::row_id run_row = 0;
  /// Set when `conversation` is created for this message: the conversation then loads
  /// from these (its agent row and history) instead of being read back from the
  /// database. When `conversation.id` is 0 it is not stored yet: its row and `history`
  /// are inserted in the same commit as this message and its run (one commit for a new
  /// conversation), and the submission fails when that commit does.
  struct fresh_conversation {
    storage::agent_record agent;
    std::vector<chat_message> history;
  };
  std::optional<fresh_conversation> fresh;
  /// The caller waits for the result (`wait`) right after submitting: the run's journal
  /// stays for that wait even when it would leave at once (`api.run_retention_ms=0`).
  bool awaited = false;
  /// How the message queues while a run is active; unset: the agent's queue policy (a
  /// channel's `queue_policy` sets it).
  std::optional<queue_policy> policy;
  /// Whose memory the run uses when not the conversation owner's (a sender in a channel
  /// thread the senders share); 0: the owner's.
  storage::row_id memory_user = 0;
  /// With `run_row`: a run that waited for a human's approval when the node stopped,
  /// resumed from its paused round (issue 19), and the journal entries it had stored.
  std::shared_ptr<const run_resume> resume;
  std::vector<journal_entry> earlier_entries;
};

/// What actors/ keeps of a run behind a ticket (its journal, the conversation that took
/// it); defined where the actors are.
struct run_handle;

/// A run the facade knows: public ids plus the opaque handle.
struct run_ticket {
  std::string run_id;
  std::string conversation_id;
  std::shared_ptr<const run_handle> handle;
};

/// A live (or retained) run found by its id, with who may see it.
struct found_live_run {
  run_ticket ticket;
  storage::row_id owner_user = 0;
};

/// Receives the entries of a run's journal (`observe`).
using entry_observer = std::function<void(const journal_entry&)>;

/// Turns one journal entry into the bytes a client gets (empty: nothing to send). An
/// empty translator sends the entry's own SSE frame (`event`, `id` = its seq, `data`),
/// encoded once by the journal and shared by every follower.
using entry_translator = std::function<std::string(const journal_entry&)>;

class chat_facade {
public:
  virtual ~chat_facade() = default;

  /// Hands the message to its conversation; answers at once with the run's ticket. Fails
  /// when the conversation cannot be loaded (its agent or provider is gone or invalid).
  virtual boost::asio::awaitable<expected<run_ticket>> submit(chat_submission submission) = 0;

  /// Waits until the run ends, at most `timeout`.
  virtual boost::asio::awaitable<expected<run_result>> wait(run_ticket run,
                                                            std::chrono::milliseconds timeout) = 0;

  /// Where the run stands now (asked of its journal, at most `timeout`).
  virtual boost::asio::awaitable<expected<run_status_view>>
  status(run_ticket run, std::chrono::milliseconds timeout) = 0;

  /// Writes what `translate` makes of every entry after `after_seq`, and then of every
  /// new one, to `stream`; ends the stream with the journal's last entry. Returns at once
  /// (the following happens in an actor). When `cancel_on_leave` and the client leaves
  /// before the end, the run is cancelled. A ticket without a handle (the run's journal
  /// is no longer in memory), or a journal that leaves memory before its end reached the
  /// stream, is replayed from storage under the same ids, after the last one written.
  virtual void follow(run_ticket run, std::uint64_t after_seq, net::response_stream stream,
                      entry_translator translate, bool cancel_on_leave) = 0;

  /// Calls `on_entry` with every entry of the run's journal after `after_seq`, then with
  /// every new one as it is appended, in order, from an actor of its own (never on the
  /// caller's thread; `on_entry` must not block). The last call carries an entry with
  /// `last` set: the journal's last entry, or, when the journal leaves memory before
  /// its end (or was not there), an end marker without bytes. Nothing is replayed from
  /// storage: an observer follows a live run (as a channel's streamed preview does).
  virtual void observe(run_ticket run, std::uint64_t after_seq, entry_observer on_entry) = 0;

  /// Cancels a run (active or queued). False when its conversation does not have it.
  virtual boost::asio::awaitable<expected<bool>> cancel(std::string conversation_id,
                                                        std::string run_id) = 0;

  /// A run started since this node began (or retained), with its owner.
  virtual std::optional<found_live_run> find_run(const std::string& run_id) const = 0;

  /// What the conversation's next prompt would carry: asked of the conversation when it
  /// is in memory, else rebuilt from the database as it would load. `not_found` when it
  /// does not exist.
  virtual boost::asio::awaitable<expected<prompt_context_view>>
  context(std::string conversation_id) = 0;

  /// How long a run of `agent` may take (its `limits.timeout_s`, else the default).
  virtual std::chrono::milliseconds run_timeout(const storage::agent_record& agent) const = 0;
  /// A new conversation id. Where the node runs on shards, one whose home is the calling
  /// thread's shard, so a conversation created by a request runs where it is served.
  virtual std::string new_conversation_id() const {
    return new_uuid();
  }
};

} // namespace troupe::actors
