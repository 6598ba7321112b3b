#pragma once

/// \file
/// Private to the channel_thread actor: the state one thread keeps and the functions its
/// files share, every file working on this one state inside the actor:
///   channel_thread.cpp    the behavior: binding, handing messages over, awaiting runs,
///                         recording their replies, the outbox
///   channel_commands.cpp  slash commands answered without the model (/new, /continue,
///                         /stop, /status, …), the dead-letter notice, archives

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "troupe/actors/channel_thread.hpp"
#include "troupe/actors/shard_scheduler.hpp"
#include "troupe/runtime/channel/commands.hpp"
#include "troupe/storage/write_op.hpp"

namespace troupe::actors::channel_detail {

/// A run handed over (or found after a restart) whose result the thread awaits.
struct awaited_run {
  std::string run_id;
  /// The uuid of the conversation that has it.
  std::string conversation_id;
  /// Asked where the run stands (`/status`).
  run_ticket ticket;
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

struct thread_state {
  channel_thread_spec spec;
  /// The bound thread row and its conversation, once known.
  std::optional<storage::channel_thread_record> thread;
  std::optional<storage::conversation_record> conversation;
  /// The message count of the conversation's archive when it was last written (0: never).
  std::size_t archived_at = 0;
  /// Journaled messages not yet handed to the conversation, in journal order.
  std::deque<storage::inbound_record> inbox;
  bool submitting = false;
  int submit_failures = 0;
  /// Parts to send, in order; the front one is in flight while `sending`.
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
  /// Runs cancelled by `/stop`: its answer said so, the run's own result adds no reply.
  std::set<std::string> stopped_runs;
  std::uint64_t generation = 0;
  /// Stopping: answered and quit once the send in flight is recorded.
  std::optional<caf::typed_response_promise<bool>> draining;
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
/// The title of a conversation the thread creates ("<channel> · <thread key>").
std::string thread_title(const thread_state& st);
/// Re-arms the idle timer (the actor passivates when nothing happens for a while).
void touch(thread_self self);
/// Hands the next journaled message on (a command is answered here, other text goes to
/// the conversation).
void pump_inbox(thread_self self);
/// Sends the next due part of the outbox.
void pump_outbox(thread_self self);
/// Reads the thread row and its conversation (and its archive mark); true when both exist.
bool load_binding(thread_state& st);
/// A reply's text in the parts the platform takes (the adapter's split).
std::vector<std::string> parts_of(const net::channel::channel_adapter& adapter,
                                  const std::string& text);
/// The outbox rows of `text` as the reply keyed by `key` (a run id, or the journaled run
/// id of a command message), parts from 0.
std::vector<storage::outbox_record> reply_rows(const thread_state& st, const std::string& key,
                                               const std::string& text);
/// Queues the rows of `rows` that were recorded pending (read back by (run, part)), then
/// pumps the outbox.
void queue_recorded(thread_self self, const std::vector<storage::outbox_record>& rows);

// channel_commands.cpp

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
