#pragma once

/// \file
/// Messaging channels in the database: the channels themselves, their threads (each
/// bound to one conversation, owned by the identity `channel:<name>:<sender>`), the
/// inbound journal (unique by channel and platform message id: a platform's redelivery
/// is a duplicate, also after a restart) and the outbox (unique by run and part: a reply
/// part is recorded once and its sending is an explicit state, so a restart never sends
/// it again blindly). Same conventions as repositories.hpp.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/runtime/channel_config.hpp"
#include "troupe/storage/connection.hpp"
#include "troupe/storage/records.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::storage {

/// A channel (`[[channels]]` or `POST /api/v1/channels`) bound to an agent. Secrets are
/// the variables' names, or `token` sealed by the secret box (API-created channels; a
/// declared channel's inline token stays in the config and is never written).
struct channel_record {
  row_id id = 0;
  std::string name;
  /// telegram | slack | webhook | wecom | wechat_mp | whatsapp | feishu | dingtalk.
  std::string kind;
  row_id agent_id = 0;
  std::string mode = "poll";
  std::string token_env;
  /// Sealed (`v1:…`), or empty.
  std::string token;
  std::string bot_token_env;
  std::string signing_secret_env;
  std::string api_base;
  /// The keys of the platforms with several (column `platform_keys`, JSON; migration 14).
  channel_platform_keys platform;
  /// thread | sender | thread_sender.
  std::string session_scope = "thread";
  /// followup | steer | interrupt | collect.
  std::string queue_policy = "followup";
  std::string callback_url;
  bool stream_edits = false;
  bool enabled = true;
  /// Declared in the config file: synced at every start.
  bool declared = false;
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
};

/// A (channel, thread key) and the conversation it is bound to.
struct channel_thread_record {
  row_id id = 0;
  row_id channel_id = 0;
  std::string thread_key;
  /// The user `channel:<name>:<sender>` of the thread's first sender.
  row_id owner_user_id = 0;
  std::optional<row_id> conversation_id;
  /// Where replies go on the platform (the generic webhook's `thread`, a Telegram chat
  /// and topic, …), as the adapter wrote it.
  std::string reply_to;
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
};

/// An inbound platform message, journaled before it is acknowledged.
struct inbound_record {
  row_id id = 0;
  row_id channel_id = 0;
  std::string platform_message_id;
  /// The platform's id of the delivery that carried it (Telegram's `update:<update_id>`,
  /// Slack's `event:<event_id>`): a second dedupe key, unique per channel while it is
  /// younger than `delivery_key_lifetime`; empty: none.
  std::string delivery_id;
  std::string thread_key;
  std::string sender;
  std::string text;
  std::string reply_to;
  /// received (journaled) | processing (handed to a run) | done | dead.
  std::string status = "received";
  /// The run it was handed to, once it was.
  std::string run_uuid;
  std::int64_t received_at = 0;
};

/// One part of a reply to send.
struct outbox_record {
  row_id id = 0;
  row_id channel_id = 0;
  row_id thread_id = 0;
  std::string run_uuid;
  std::int64_t part = 0;
  std::string text;
  /// pending (to send) | sending (intent recorded, outcome not yet) | sent | dead.
  std::string status = "pending";
  std::int64_t attempts = 0;
  std::string last_error;
  /// Not sent before this time (ms since the epoch): the platform's retry_after.
  std::int64_t next_attempt_at = 0;
  /// The platform's id of the sent message, when it gives one.
  std::string platform_message_id;
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
  std::optional<std::int64_t> sent_at;
  /// Where the part goes on the platform (the `reply_to` of the message it answers);
  /// empty: the thread's.
  std::string reply_to;
  /// A streamed preview: part 0 of a run posted before the run ended (`stream_edits`),
  /// its text then edited as tokens arrive.
  bool preview = false;
  /// The final text a sent preview must become, and that edit's state: "" (none owed),
  /// pending, done, or dead (it failed for good: the text went out as a new message).
  std::string edit_text;
  std::string edit_status;
  std::int64_t edit_attempts = 0;
  /// The final edit is not made before this time (ms since the epoch).
  std::int64_t edit_next_at = 0;
};

// channels
/// Fails with `conflict` when the name is taken.
expected<row_id> insert_channel(connection& c, channel_record r);
/// Inserts or rewrites (by name) a channel declared in the config file.
expected<row_id> upsert_declared_channel(connection& c, channel_record r);
expected<channel_record> find_channel(connection& c, row_id id);
expected<channel_record> find_channel_by_name(connection& c, std::string_view name);
expected<std::vector<channel_record>> list_channels(connection& c);
/// One page of the channels by name, and how many there are in all.
expected<std::vector<channel_record>> list_channels_page(connection& c, page p);
expected<page_total> count_channels(connection& c);
/// Rewrites every column but `name`, `declared` and `created_at` of channel `r.id`.
expected<void> update_channel(connection& c, const channel_record& r);
/// Deletes a channel with its threads, journal and outbox (its conversations stay).
expected<void> delete_channel(connection& c, row_id id);

/// The record of a declared channel whose agent has row `agent_id` (its inline token is
/// left out: it stays in the config).
channel_record declared_channel_record(const channel_settings& ch, row_id agent_id);
/// Upserts every declared channel by name in one transaction, at start; a channel whose
/// agent is in neither the config nor the database fails it, naming both.
expected<std::size_t> sync_declared_channels(connection& c,
                                             const std::vector<channel_settings>& channels);

/// The user named `identity` (`channel:<name>:<sender>`), created on first use.
expected<row_id> ensure_channel_user(connection& c, std::string_view identity);

// threads
/// Creates the (channel, thread key) row; when it exists already, returns it unchanged
/// (the first binding wins).
expected<channel_thread_record> bind_channel_thread(connection& c, channel_thread_record r);
/// Points thread `id` at `conversation_id` (a fresh conversation after /new).
expected<void> set_thread_conversation(connection& c, row_id id, row_id conversation_id);
/// Points thread `id` at `conversation_id` owned by `owner_user_id` (`/new` by another
/// sender of a group thread, `/continue N`).
expected<void> set_thread_binding(connection& c, row_id id, row_id owner_user_id,
                                  row_id conversation_id);
expected<channel_thread_record> find_channel_thread(connection& c, row_id channel_id,
                                                    std::string_view thread_key);
expected<channel_thread_record> find_channel_thread_by_id(connection& c, row_id id);
/// A channel's threads, most recently active first.
expected<std::vector<channel_thread_record>>
list_channel_threads(connection& c, row_id channel_id, std::int64_t limit, std::int64_t offset);

// the inbound journal
/// The outcome of journaling an inbound message.
struct journal_result {
  row_id id = 0;
  /// The platform delivered this message id before: do not process it again.
  bool duplicate = false;
};
/// How long a delivery id stays a dedupe key: Telegram numbers updates anew after a week
/// without any, so an older row's update_id may be a new update's.
inline constexpr std::int64_t delivery_key_lifetime_ms = 7LL * 24 * 3600 * 1000;
/// Journals `r` once: a duplicate when the channel has its platform message id, or (when
/// `r.delivery_id` is set) a row younger than `delivery_key_lifetime_ms` has its delivery
/// id (an older row gives its delivery id up).
expected<journal_result> journal_inbound(connection& c, inbound_record r);
/// Moves a journaled message on; `run_uuid` (when not empty) records its run.
expected<void> set_inbound_status(connection& c, row_id id, std::string_view status,
                                  std::string_view run_uuid = {});
expected<inbound_record> find_inbound(connection& c, row_id id);
/// The journaled message whose run is `run_uuid` (the run named when it was journaled);
/// not_found when none is (a run no channel message started).
expected<inbound_record> find_inbound_by_run(connection& c, std::string_view run_uuid);
/// A channel's journaled messages with `status`, oldest first (every channel's when
/// `channel_id` is 0).
expected<std::vector<inbound_record>> list_inbound(connection& c, row_id channel_id,
                                                   std::string_view status);
/// How many messages a channel has journaled.
expected<std::int64_t> count_inbound(connection& c, row_id channel_id);
/// How many messages a channel has journaled, by status (received, processing, done,
/// dead), and in all.
struct inbound_counts {
  std::int64_t received = 0;
  std::int64_t processing = 0;
  std::int64_t done = 0;
  std::int64_t dead = 0;
  std::int64_t total = 0;
};
expected<inbound_counts> count_inbound_by_status(connection& c, row_id channel_id);

// the outbox
/// Records a part to send; the same (run, part) is not added twice: its id is returned.
expected<row_id> enqueue_outbox(connection& c, outbox_record r);
/// The intent to send: pending -> sending, one attempt more. Fails with `conflict` when
/// the entry is not pending (another sender has it, or it is done).
expected<void> claim_outbox(connection& c, row_id id);
/// What recording a reply part did (`enqueue_reply_part`).
enum class reply_part_recorded {
  /// A new entry, pending.
  queued,
  /// The entry of this (run, part) was there already (not a preview): left as it was.
  existed,
  /// Part 0 was a preview not sent yet (or dead-lettered): it now holds the final text
  /// and goes out as an ordinary part.
  preview_replaced,
  /// Part 0 was a preview sent (or being sent): it owes the final edit (`edit_text`,
  /// pending, not before `r.edit_next_at`).
  edit_owed,
};
/// Records part `r` of a run's final reply: as `enqueue_outbox`, except that a preview
/// holding its key takes the final text (as above) instead of being left as it is.
expected<reply_part_recorded> enqueue_reply_part(connection& c, const outbox_record& r);
/// sending -> sent. When `sent_text` is the final text an edit owed (the preview went out
/// after the final answer was recorded), the edit is done too.
expected<void> mark_outbox_sent(connection& c, row_id id, std::string_view platform_message_id,
                                std::string_view sent_text = {});
/// The final edit of entry `id` was made: done, and the entry's text is the final text.
expected<void> mark_outbox_edited(connection& c, row_id id);
/// The final edit failed: pending again not before `retry_at`, one attempt more; after
/// `max_attempts` (or at once with `permanent`) it is given up, and the entry goes out
/// as a new message with the final text (pending, edit `dead`, `why` in last_error).
expected<void> record_outbox_edit_failure(connection& c, row_id id, std::string_view why,
                                          std::int64_t retry_at, std::int64_t max_attempts,
                                          bool permanent);
/// Entries sent whose final edit is pending, oldest first (start-up recovery).
expected<std::vector<outbox_record>> list_outbox_edits(connection& c);
/// sending -> pending again, not before `retry_at`; dead (with the error) once the entry
/// has had `max_attempts` attempts.
expected<void> record_outbox_failure(connection& c, row_id id, std::string_view error_text,
                                     std::int64_t retry_at, std::int64_t max_attempts);
/// -> dead with the error, whatever the attempts (a permanent failure).
expected<void> mark_outbox_dead(connection& c, row_id id, std::string_view error_text);
expected<outbox_record> find_outbox(connection& c, row_id id);
/// The entry of part `part` of run `run_uuid`.
expected<outbox_record> find_outbox_part(connection& c, std::string_view run_uuid,
                                         std::int64_t part);
/// A channel's entries with `status` (every status when empty), oldest first.
expected<std::vector<outbox_record>> list_outbox(connection& c, row_id channel_id,
                                                 std::string_view status);
/// The dead-lettered entries of thread `thread_id` its user was not told about yet,
/// oldest first.
expected<std::vector<outbox_record>> unnotified_dead_letters(connection& c, row_id thread_id);
/// Records that the user of thread `thread_id` was told about its dead letters up to
/// entry `through_id` (the notice is given once).
expected<void> set_dead_letters_notified(connection& c, row_id thread_id, row_id through_id);
/// Every channel's entries with `status`, oldest first (start-up recovery).
expected<std::vector<outbox_record>> list_outbox_with_status(connection& c,
                                                             std::string_view status);

} // namespace troupe::storage
