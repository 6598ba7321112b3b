#pragma once

/// \file
/// The channel_thread actor: one per (channel, thread key). It takes the messages of its
/// thread in the order they were journaled, binds the thread to a conversation once (the
/// actor is the only one creating it, so messages that arrive together never create
/// two), hands each message to that conversation (which applies the channel's queue
/// policy while a run is active), and sends each run's final answer through the outbox:
/// every part is recorded (pending) before anything is sent, claimed (`sending`) right
/// before the send, and marked sent or failed after it; a failure is retried after the
/// platform's retry_after (or a doubling back-off) until the attempts run out, and then
/// the part is dead-lettered (visible over the API). With `stream_edits` (and an adapter
/// that edits), a run's part 0 is posted early, through the same outbox, and edited as
/// the run's tokens arrive (at most once a second); the final answer then replaces it
/// with one final edit, owed in the outbox (see docs/channels.md).
///
/// Where it runs: on a shard (homed by its key); database reads go through the read
/// pool, writes through the store_writer, I/O through the bridge (start_io).

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "troupe/actors/approvals_facade.hpp"
#include "troupe/actors/bridge.hpp"
#include "troupe/actors/chat_facade.hpp"
#include "troupe/actors/store_writer.hpp"
#include "troupe/net/channel/adapter.hpp"
#include "troupe/net/http_client.hpp"
#include "troupe/runtime/channel_config.hpp"
#include "troupe/storage/catalog_cache.hpp"
#include "troupe/storage/channels.hpp"
#include "troupe/storage/database.hpp"

namespace troupe::tools {
class blocking_pool;
} // namespace troupe::tools

namespace troupe::actors {

/// What the outbox does with a part that cannot be sent at once.
struct outbox_policy {
  /// Attempts per part before it is dead-lettered.
  std::int64_t max_attempts = 6;
  /// The wait after a failure when the platform names none: first, then doubling.
  std::chrono::milliseconds first_backoff{1'000};
  std::chrono::milliseconds max_backoff{300'000};
  /// The deadline of one send (or edit).
  std::chrono::milliseconds send_timeout{15'000};
};

/// The least time between two changes of a streamed preview (its post, its edits).
inline constexpr std::chrono::milliseconds preview_edit_interval{1'000};

/// A channel as its threads use it: its row and the adapter speaking its platform. The
/// adapter's `bot_name` (a Telegram bot's username, from getMe) decides whose slash
/// commands are ours: `/new@other_bot` goes to the model as text; while it is unknown,
/// every `/cmd@…` is taken as ours.
struct live_channel {
  storage::channel_record record;
  std::shared_ptr<net::channel::channel_adapter> adapter;
  session_scope scope = session_scope::thread;
  queue_policy queue = queue_policy::followup;
};

/// What every thread of a channel service shares.
struct channel_thread_context {
  caf::actor_system* system = nullptr;
  store_writer_actor writer;
  std::shared_ptr<storage::read_pool> reads;
  /// Where a thread that wakes reads its binding (its thread row and conversation), so
  /// that the read does not hold its shard. Null: on the thread's own shard (tests).
  std::shared_ptr<tools::blocking_pool> blocking;
  std::shared_ptr<storage::catalog_cache> catalog;
  std::shared_ptr<chat_facade> chat;
  /// Decisions of `/approve ID` and `/deny ID` (issue 19); null: none over channels.
  std::shared_ptr<approvals_facade> approvals;
  /// Sends run on the calling shard's client (`shard_http`), else on `http`.
  net::http_client* http = nullptr;
  std::shared_ptr<const std::vector<net::http_client*>> shard_http;
  outbox_policy outbox;
  /// A thread without work for this long leaves memory (its state is in SQLite).
  std::chrono::milliseconds idle_ttl{std::chrono::minutes(10)};
  /// The longest the typing indicator is kept up for one stretch of runs.
  std::chrono::milliseconds typing_cap{std::chrono::minutes(2)};
  /// Beyond an agent's deadline, how long a thread waits for a run's answer (renewed while
  /// the run waits for a human's approval).
  std::chrono::milliseconds run_grace{std::chrono::minutes(1)};

  net::http_client* http_here() const noexcept;
};

struct channel_thread_spec {
  std::shared_ptr<const live_channel> channel;
  std::string thread_key;
  std::shared_ptr<const channel_thread_context> context;
  /// Called when the actor is gone (passivated, stopped, or failed: `reason` says), so
  /// its owner forgets it (and, after a failure, hands what it held to a new one).
  std::function<void(const caf::actor_addr&, const caf::error& reason)> on_exit;
  /// Asked before the actor passivates: true lets it go (its owner forgot it), false keeps
  /// it (something was handed to it meanwhile). `mailbox_empty` is called under the
  /// owner's lock. Unset: it goes.
  std::function<bool(const caf::actor_addr&, const std::function<bool()>& mailbox_empty)> retire;
};

/// Text of a run's answer streamed so far (a `model.delta`), or the news that the
/// candidate so far was discarded (`reset`: a `model.correction`); from the run's journal.
struct preview_delta {
  std::string run_id;
  std::string text;
  /// The model round the text belongs to (a new round starts a new candidate).
  std::int64_t round = 0;
  bool reset = false;
};

/// A tool call of an awaited run waits for a human (the run's `approval` event): the
/// thread asks its user (issue 19).
struct approval_request {
  std::string run_id;
  std::string id;
  std::string tool;
  std::string arguments;
  std::string reason;
  std::int64_t timeout_s = 0;
  /// Where the run's message is (the reply goes there).
  std::string reply_to;
};

/// A journaled message for the thread.
using inbound_atom = caf::atom_constant<caf::atom("inbound")>;
/// Parts of the outbox to send (start-up recovery), or the retry timer.
using outbox_atom = caf::atom_constant<caf::atom("outbox")>;
/// The thread's own idle timer.
using thread_idle_atom = caf::atom_constant<caf::atom("thr_idle")>;
/// Shutdown: finish recording the send in flight, take nothing more, quit.
using drain_atom = caf::atom_constant<caf::atom("drain")>;
/// A thread's answer to `drain_atom`: it recorded its send in flight (or had none).
using drained_atom = caf::atom_constant<caf::atom("drained")>;
/// Streamed text of an awaited run (stream_edits), and the timer of its next edit.
using preview_atom = caf::atom_constant<caf::atom("preview")>;
/// An awaited run's tool call waits for a human's approval.
using ask_approval_atom = caf::atom_constant<caf::atom("ask_apr")>;

/// The interface:
///   (inbound_atom, inbound_record)   a journaled message of this thread (one it has
///                                    already is dropped); recovered at start with status
///                                    "processing", its run was accepted before: its
///                                    result is awaited, the message not handed over again
///   (outbox_atom, outbox_record)     a part recorded before a restart, to send (or, sent
///                                    with a final edit pending, to edit)
///   (outbox_atom)                    the retry timer
///   (thread_idle_atom, generation)   passivates when nothing happened since
///   (preview_atom, preview_delta)    streamed text of an awaited run (stream_edits)
///   (preview_atom, run_id)           the timer of that run's next preview edit
///   (ask_approval_atom, request)     a call of an awaited run waits for a human: the
///                                    thread's user is asked (once per approval)
///   (drain_atom, waiter)             sends `drained_atom` to `waiter` and quits once no
///                                    send is in flight: its outcome is recorded before a
///                                    stop
using channel_thread_actor = caf::typed_actor<
    caf::reacts_to<inbound_atom, storage::inbound_record>,
    caf::reacts_to<outbox_atom, storage::outbox_record>, caf::reacts_to<outbox_atom>,
    caf::reacts_to<thread_idle_atom, std::uint64_t>, caf::reacts_to<preview_atom, preview_delta>,
    caf::reacts_to<preview_atom, std::string>, caf::reacts_to<ask_approval_atom, approval_request>,
    caf::reacts_to<drain_atom, caf::actor>, io_completion_handler>;

channel_thread_actor spawn_channel_thread(caf::actor_system& system, channel_thread_spec spec);

} // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::storage::inbound_record)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::storage::outbox_record)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::preview_delta)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::approval_request)
