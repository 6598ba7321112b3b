#pragma once

/// \file
/// Private to the channel_thread actor: the state one thread keeps and the functions its
/// files share, every file working on this one state inside the actor:
///   channel_thread.cpp    the behavior: binding, handing messages over
///   channel_replies.cpp   runs awaited (typing meanwhile) and their replies recorded
///   channel_outbox.cpp    the outbox: parts claimed, sent and recorded one at a time,
///                         retries, and the final edit a streamed preview owes
///   channel_preview.cpp   stream_edits: a run's tokens followed, its part 0 posted early
///                         and edited at most once a second
///   channel_commands.cpp  slash commands answered without the model (/new, /continue,
///                         /stop, /status, …), the dead-letter notice, archives

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/actors/channel_thread.hpp"
#include "troupe/actors/shard_scheduler.hpp"
#include "troupe/runtime/channel/commands.hpp"
#include "troupe/storage/write_op.hpp"

namespace troupe::actors::channel_detail {

/// A run handed over (or found after a restart) whose result the thread awaits.
/// The outbox key of a message asking a human to decide an approval: the prefix, then the
/// approval's id (channel_approvals.cpp); its part carries the answers as buttons.
inline constexpr std::string_view approval_ask_prefix = "approval:";

struct awaited_run {
  std::string run_id;
  /// The uuid of the conversation that has it.
  std::string conversation_id;
  /// Asked where the run stands (`/status`).
  run_ticket ticket;
  /// The run asked a human to approve a call (ask_approval): its wait for the answer is
  /// renewed while the run goes on, since a human's decision may take longer than the
  /// wait's limit (the run's own deadline moves by the time it waited for the human).
  bool asked_approval = false;
};

/// The flag a typing loop (net::channel::keep_typing) runs on; cleared when its holder goes,
/// however the actor ends.
struct typing_flag {
  std::shared_ptr<std::atomic<bool>> active;
  typing_flag() = default;
  typing_flag(const typing_flag&) = delete;
  typing_flag& operator=(const typing_flag&) = delete;
  ~typing_flag() {
    if (active) {
      active->store(false);
    }
  }
};

/// A run's streamed preview (stream_edits): the answer as its tokens arrive, and the
/// platform message that shows its first part.
struct preview_state {
  /// The candidate answer so far (of the model round `round`).
  std::string candidate;
  std::int64_t round = 0;
  /// Where the message is (the reply_to of the message the run answers).
  std::string reply_to;
  /// The text the platform shows (empty before the post).
  std::string shown;
  /// The outbox row (part 0, a preview) is recorded, or on its way to the store.
  bool recorded = false;
  /// The platform's id of the posted preview; empty until it is sent.
  std::string platform_message_id;
  /// An edit of the preview is in flight.
  bool editing = false;
  /// The timer of the next edit is set.
  bool tick_set = false;
  /// An edit failed for good: no more edits until the final one.
  bool broken = false;
  /// The run's reply is recorded: no edit but the final one.
  bool finished = false;
  /// The post or the last edit; the next change waits `preview_edit_interval`.
  std::chrono::steady_clock::time_point last_change{};
  /// A platform's retry_after (429) for edits.
  std::chrono::steady_clock::time_point not_before{};
};

struct thread_state {
  channel_thread_spec spec;
  /// The bound thread row and its conversation, once known.
  std::optional<storage::channel_thread_record> thread;
  std::optional<storage::conversation_record> conversation;
  /// The message count of the conversation's archive when it was last written (0: never).
  std::size_t archived_at = 0;
  /// Journaled messages not yet handed to the conversation, in journal order.
  std::deque<storage::inbound_record> inbox;
  /// Journal rows this life of the actor took off its inbox (bounded): a hand-over of one
  /// again (a platform's redelivery of a row whose first hand-over was late) is dropped.
  std::set<storage::row_id> taken;
  std::deque<storage::row_id> taken_order;
  bool submitting = false;
  int submit_failures = 0;
  /// The user rows of the thread's senders (`channel:<name>:<sender>`): whose memory a
  /// run uses when the conversation is the thread's.
  std::map<std::string, storage::row_id> sender_users;
  /// Parts to send, in order; the front one is in flight while `sending`. An entry with
  /// status "sent" and edit_status "pending" is a final edit to make.
  std::deque<storage::outbox_record> outbox;
  bool sending = false;
  /// The retry timer is set (an `outbox_atom` is on its way).
  bool timer_set = false;
  /// Runs handed over whose results are awaited, oldest first (`waiting_runs` also counts
  /// results read back from the database after a restart, which have no entry here).
  std::size_t waiting_runs = 0;
  std::deque<awaited_run> runs;
  /// Set while runs are awaited: the platform's typing indicator is kept up (keep_typing).
  typing_flag typing;
  /// The newest dead-lettered outbox entry the user was told about (or is being told
  /// about: its notice is on its way to the store).
  storage::row_id notice_through = 0;
  /// Runs cancelled by `/stop`: its answer said so, the run's own result adds no reply
  /// (but ends its preview, if it has one).
  std::set<std::string> stopped_runs;
  /// Streamed previews by run id, and the runs whose preview is over (late tokens of
  /// those are dropped; bounded).
  std::map<std::string, preview_state> previews;
  std::set<std::string> closed_previews;
  std::deque<std::string> closed_order;
  std::uint64_t generation = 0;
  /// Stopping: told (drained_atom) and quit once the send in flight is recorded.
  std::optional<caf::actor> draining;
};

using thread_self = homed_typed_actor<thread_state, channel_thread_actor>*;

inline const live_channel& channel_of(const thread_state& st) {
  return *st.spec.channel;
}

/// Sends `op` to the store writer; `then(write_result)` runs in the actor.
template <class Then> void store(thread_self self, storage::write_op op, Then then) {
  self->request(self->state.spec.context->writer, store_write_timeout, write_atom::value,
                std::move(op))
      .then([then](write_result& r) mutable { then(std::move(r)); },
            [then](caf::error& e) mutable { then(tl::unexpected(from_caf_error(e))); });
}

/// The front message was not taken (or its command not recorded): counts the failure and
/// offers it again after the back-off (given up after a few attempts).
void retry_front_later(thread_self self);
/// Takes the front message off the inbox, remembering it was taken.
void pop_front_message(thread_self self);
/// The title of a conversation the thread creates ("<channel> · <thread key>").
std::string thread_title(const thread_state& st);
/// The identity that owns the thread's conversations and archives (channel_config.hpp).
std::string owner_identity(const thread_state& st, const storage::inbound_record& m);
/// Re-arms the idle timer (the actor passivates when nothing happens for a while).
void touch(thread_self self);
/// Hands the next journaled message on (a command is answered here, other text goes to
/// the conversation).
void pump_inbox(thread_self self);
/// Reads the thread row and its conversation (and its archive mark) on the calling thread;
/// true when both exist. A thread woken by a message reads them off its shard instead.
bool load_binding(thread_state& st);
/// The wait after `attempts` failed attempts, when the platform named none.
std::chrono::milliseconds backoff(const outbox_policy& p, std::int64_t attempts);

// channel_replies.cpp

/// Waits (through the bridge) for the run of `ticket`, then records its reply (to
/// `reply_to`, the answered message's place); streams its text when the thread does.
void await_result(thread_self self, storage::row_id inbound_id, const std::string& reply_to,
                  run_ticket ticket, std::chrono::milliseconds limit);
/// Records the run's answer in the outbox (once per (run, part); a preview of part 0
/// takes the final text instead), marks message `inbound_id` done, and queues the parts.
void record_reply(thread_self self, storage::row_id inbound_id, const std::string& reply_to,
                  run_result result);
/// The result of a run that ended before a restart, from its rows (its final answer, or
/// why it has none).
run_result stored_result(const channel_thread_context& ctx, const std::string& run_uuid);
/// Takes the typing indicator down.
void stop_typing(thread_state& st);

// channel_outbox.cpp

/// A reply's text in the parts the platform takes (the adapter's split).
std::vector<std::string> parts_of(const net::channel::channel_adapter& adapter,
                                  const std::string& text);
/// The outbox rows of `text` as the reply keyed by `key` (a run id, or the journaled run
/// id of a command message), parts from 0, going to `reply_to` (empty: the thread's).
std::vector<storage::outbox_record> reply_rows(const thread_state& st, const std::string& key,
                                               const std::string& text,
                                               const std::string& reply_to);
/// Queues the rows of `rows` as they are stored now (read back by (run, part) on the
/// calling thread), as `queue_stored` does.
void queue_recorded(thread_self self, const std::vector<storage::outbox_record>& rows);
/// Queues outbox rows as stored: a pending one to send, a sent one that owes its final
/// edit to edit; then pumps the outbox.
void queue_stored(thread_self self, std::vector<storage::outbox_record> stored);
/// `op`, after which each of `rows` is read back as stored (by its run and part, in the
/// same transaction on the writer's thread) into `*stored`, for `queue_stored`: a
/// recorded reply is queued without a read on the thread's shard.
storage::write_op with_stored_parts(storage::write_op op, std::vector<storage::outbox_record> rows,
                                    std::shared_ptr<std::vector<storage::outbox_record>> stored);
/// Sends (or edits) the next due entry of the outbox.
void pump_outbox(thread_self self);
/// Nothing is in flight any more: a stop that waited for it goes on.
bool finish_drain(thread_self self);

// channel_preview.cpp

/// Whether the thread streams its runs' answers (stream_edits, and an adapter that edits).
bool streams(const thread_state& st);
/// Follows the journal of `ticket` for its streamed text (when the thread streams).
void follow_preview(thread_self self, const run_ticket& ticket, const std::string& reply_to);
/// Streamed text of a run: the preview is posted, or edited when it is due.
void on_preview_delta(thread_self self, preview_delta delta);
/// The edit timer of run `run_id`.
void on_preview_tick(thread_self self, const std::string& run_id);
/// The preview of `run_id` was posted as `platform_message_id` showing `text`.
void preview_posted(thread_self self, const std::string& run_id,
                    const std::string& platform_message_id, const std::string& text);
/// The text a preview row shows when it is sent now (the candidate so far, else `stored`).
std::string preview_text(const thread_state& st, const std::string& run_id,
                         const std::string& stored);
/// The run's reply is being recorded: no more intermediate edits. Returns when the final
/// edit may be made at the earliest (ms since the epoch: a second after the last change).
std::int64_t close_preview(thread_state& st, const std::string& run_id);
/// The final text of a preview whose run was stopped (`/stop`): what it showed, marked.
std::optional<std::string> stopped_preview_text(const thread_state& st, const std::string& run_id);
/// The final edit of `run_id` was made (or given up): its preview is over.
void forget_preview(thread_state& st, const std::string& run_id);
/// An intermediate edit of `run_id` is in flight (the final edit waits for it).
bool preview_editing(const thread_state& st, const std::string& run_id);
/// When the next change of `run_id`'s preview may be made, in ms since the epoch (0: now).
std::int64_t preview_next_change(const thread_state& st, const std::string& run_id);

// channel_approvals.cpp

/// Follows the journal of `ticket` for its approvals: a call that waits for a human is
/// asked about in the thread (`ask_approval_atom`).
void follow_approvals(thread_self self, const run_ticket& ticket, const std::string& reply_to);
/// Asks the thread's user to decide `request` (once per approval: the message is keyed
/// by its id).
void ask_approval(thread_self self, approval_request request);
/// `/approve ID` or `/deny ID` (the inbox's front message): decided when the sender is
/// the one the approval waits for (or an admin), stored with the answer in one commit,
/// then handed to the run.
void decide_approval(thread_self self, const storage::inbound_record& message,
                     const channel::command& command);

// channel_commands.cpp

/// The effect of a command in its commit; it chooses which of the answers is recorded.
using choosing_effect = std::function<expected<std::size_t>(storage::connection&)>;
using chosen_fn = std::function<void(thread_self, std::size_t)>;
/// Records one of `texts` (the one `effect` chooses; the first without an effect) as the
/// answer to command message `m`, with the effect (and the notice owed) in one commit,
/// then runs `after` with the choice, takes the message off the inbox and moves on. A
/// failed commit runs `failed` and leaves the message at the front: it is answered again
/// after a back-off (nothing of it was stored).
void finish_command_choosing(thread_self self, const storage::inbound_record& m,
                             const std::vector<std::string>& texts, choosing_effect effect,
                             chosen_fn after = {}, std::function<void(thread_self)> failed = {});
/// Answers `command` (the inbox's front message, a slash command other than `/compact`)
/// without the model; pops the message and pumps the inbox once its reply is recorded.
void answer_command(thread_self self, const storage::inbound_record& message,
                    const channel::command& command);
/// The dead-letter notice owed to the thread's user: the row to record before the next
/// reply, and the newest dead entry it covers; nullopt when nothing is owed.
struct dead_letter_notice {
  storage::outbox_record row;
  storage::row_id through_id = 0;
};
std::optional<dead_letter_notice> owed_notice(const thread_state& st,
                                              const storage::inbound_record& message);
/// Records `notice` in the outbox and the thread's notified mark, in the commit of `c`.
expected<void> record_notice(storage::connection& c, const dead_letter_notice& notice);
/// Rewrites the conversation's archive when its message count says it is due (a write of
/// its own, after a reply was recorded).
void refresh_archive(thread_self self);

} // namespace troupe::actors::channel_detail
