#include "troupe/storage/channels.hpp"

#include "query.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::storage {

using namespace detail;

namespace {

constexpr std::string_view channel_columns =
    "id, name, kind, agent_id, mode, token_env, token, bot_token_env, signing_secret_env, "
    "api_base, session_scope, queue_policy, callback_url, stream_edits, enabled, declared, "
    "created_at, updated_at, platform_keys";
channel_record read_channel(const statement& s) {
  channel_record r;
  r.id = s.int64(0);
  r.name = s.text(1);
  r.kind = s.text(2);
  r.agent_id = s.int64(3);
  r.mode = s.text(4);
  r.token_env = s.text(5);
  r.token = s.text(6);
  r.bot_token_env = s.text(7);
  r.signing_secret_env = s.text(8);
  r.api_base = s.text(9);
  r.session_scope = s.text(10);
  r.queue_policy = s.text(11);
  r.callback_url = s.text(12);
  r.stream_edits = s.int64(13) != 0;
  r.enabled = s.int64(14) != 0;
  r.declared = s.int64(15) != 0;
  r.created_at = s.int64(16);
  r.updated_at = s.int64(17);
  // Written by encode_platform_keys only; a row that does not parse reads as no keys.
  r.platform = decode_platform_keys(s.text(18)).value_or(channel_platform_keys{});
  return r;
}

constexpr std::string_view thread_columns =
    "id, channel_id, thread_key, owner_user_id, conversation_id, reply_to, created_at, updated_at";
channel_thread_record read_thread(const statement& s) {
  return {s.int64(0),          s.int64(1), s.text(2),  s.int64(3),
          s.optional_int64(4), s.text(5),  s.int64(6), s.int64(7)};
}

constexpr std::string_view inbound_columns =
    "id, channel_id, platform_message_id, thread_key, sender, text, reply_to, status, run_uuid, "
    "received_at, IFNULL(delivery_id, '')";
inbound_record read_inbound(const statement& s) {
  inbound_record r;
  r.id = s.int64(0);
  r.channel_id = s.int64(1);
  r.platform_message_id = s.text(2);
  r.thread_key = s.text(3);
  r.sender = s.text(4);
  r.text = s.text(5);
  r.reply_to = s.text(6);
  r.status = s.text(7);
  r.run_uuid = s.text(8);
  r.received_at = s.int64(9);
  r.delivery_id = s.text(10);
  return r;
}

constexpr std::string_view outbox_columns =
    "id, channel_id, thread_id, run_uuid, part, text, status, attempts, last_error, "
    "next_attempt_at, platform_message_id, created_at, updated_at, sent_at, reply_to, preview, "
    "edit_text, edit_status, edit_attempts, edit_next_at";
outbox_record read_outbox(const statement& s) {
  outbox_record r;
  r.id = s.int64(0);
  r.channel_id = s.int64(1);
  r.thread_id = s.int64(2);
  r.run_uuid = s.text(3);
  r.part = s.int64(4);
  r.text = s.text(5);
  r.status = s.text(6);
  r.attempts = s.int64(7);
  r.last_error = s.text(8);
  r.next_attempt_at = s.int64(9);
  r.platform_message_id = s.text(10);
  r.created_at = s.int64(11);
  r.updated_at = s.int64(12);
  r.sent_at = s.optional_int64(13);
  r.reply_to = s.text(14);
  r.preview = s.int64(15) != 0;
  r.edit_text = s.text(16);
  r.edit_status = s.text(17);
  r.edit_attempts = s.int64(18);
  r.edit_next_at = s.int64(19);
  return r;
}

} // namespace

// --- channels ---

expected<row_id> insert_channel(connection& c, channel_record r) {
  const auto t = stamp(r.created_at);
  return insert_row(c,
                    "INSERT INTO channels (name, kind, agent_id, mode, token_env, token, "
                    "bot_token_env, signing_secret_env, api_base, session_scope, queue_policy, "
                    "callback_url, stream_edits, enabled, declared, created_at, updated_at, "
                    "platform_keys) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    r.name, r.kind, r.agent_id, r.mode, r.token_env, r.token, r.bot_token_env,
                    r.signing_secret_env, r.api_base, r.session_scope, r.queue_policy,
                    r.callback_url, r.stream_edits, r.enabled, r.declared, t, t,
                    encode_platform_keys(r.platform));
}

expected<row_id> upsert_declared_channel(connection& c, channel_record r) {
  const auto t = now_millis();
  return c.query_int(
      "INSERT INTO channels (name, kind, agent_id, mode, token_env, token, bot_token_env, "
      "signing_secret_env, api_base, session_scope, queue_policy, callback_url, stream_edits, "
      "enabled, declared, created_at, updated_at, platform_keys) "
      "VALUES (?1, ?2, ?3, ?4, ?5, '', ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 1, ?14, ?14, ?15) "
      "ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, agent_id = excluded.agent_id, "
      "mode = excluded.mode, token_env = excluded.token_env, token = '', "
      "bot_token_env = excluded.bot_token_env, signing_secret_env = excluded.signing_secret_env, "
      "api_base = excluded.api_base, session_scope = excluded.session_scope, "
      "queue_policy = excluded.queue_policy, callback_url = excluded.callback_url, "
      "stream_edits = excluded.stream_edits, enabled = excluded.enabled, declared = 1, "
      "updated_at = excluded.updated_at, platform_keys = excluded.platform_keys RETURNING id",
      r.name, r.kind, r.agent_id, r.mode, r.token_env, r.bot_token_env, r.signing_secret_env,
      r.api_base, r.session_scope, r.queue_policy, r.callback_url, r.stream_edits, r.enabled, t,
      encode_platform_keys(r.platform));
}

expected<channel_record> find_channel(connection& c, row_id id) {
  static const auto sql = select(channel_columns, "channels", "WHERE id = ?");
  return query_one<channel_record>(c, "channel", sql, read_channel, id);
}

expected<channel_record> find_channel_by_name(connection& c, std::string_view name) {
  static const auto sql = select(channel_columns, "channels", "WHERE name = ?");
  return query_one<channel_record>(c, "channel", sql, read_channel, name);
}

expected<std::vector<channel_record>> list_channels(connection& c) {
  static const auto sql = select(channel_columns, "channels", "ORDER BY name");
  return query_all<channel_record>(c, sql, read_channel);
}

expected<std::vector<channel_record>> list_channels_page(connection& c, page p) {
  static const auto sql = select(channel_columns, "channels", "ORDER BY name LIMIT ? OFFSET ?");
  return query_all<channel_record>(c, sql, read_channel, p.limit, p.offset);
}

expected<page_total> count_channels(connection& c) {
  auto n = c.query_int("SELECT COUNT(*) FROM channels");
  if (!n) {
    return tl::unexpected(n.error());
  }
  return page_total{*n};
}

expected<void> update_channel(connection& c, const channel_record& r) {
  return change_one(c, "channel", r.id,
                    "UPDATE channels SET kind = ?, agent_id = ?, mode = ?, token_env = ?, "
                    "token = ?, bot_token_env = ?, signing_secret_env = ?, api_base = ?, "
                    "session_scope = ?, queue_policy = ?, callback_url = ?, stream_edits = ?, "
                    "enabled = ?, updated_at = ?, platform_keys = ? WHERE id = ?",
                    r.kind, r.agent_id, r.mode, r.token_env, r.token, r.bot_token_env,
                    r.signing_secret_env, r.api_base, r.session_scope, r.queue_policy,
                    r.callback_url, r.stream_edits, r.enabled, now_millis(),
                    encode_platform_keys(r.platform), r.id);
}

expected<void> delete_channel(connection& c, row_id id) {
  return change_one(c, "channel", id, "DELETE FROM channels WHERE id = ?", id);
}

channel_record declared_channel_record(const channel_settings& ch, row_id agent_id) {
  channel_record r;
  r.name = ch.name;
  r.kind = std::string(to_string(ch.type));
  r.agent_id = agent_id;
  r.mode = ch.mode;
  r.token_env = ch.token_env;
  r.bot_token_env = ch.bot_token_env;
  r.signing_secret_env = ch.signing_secret_env;
  r.platform = ch.platform;
  r.api_base = ch.api_base;
  r.session_scope = std::string(to_string(ch.scope));
  r.queue_policy = std::string(to_string(ch.queue));
  r.callback_url = ch.callback_url;
  r.stream_edits = ch.stream_edits;
  r.enabled = ch.enabled;
  r.declared = true;
  return r;
}

expected<std::size_t> sync_declared_channels(connection& c,
                                             const std::vector<channel_settings>& channels) {
  return in_transaction(c, [&](connection& conn) -> expected<std::size_t> {
    for (const auto& ch : channels) {
      auto agent = find_agent_by_name(conn, ch.agent);
      if (!agent) {
        agent = find_agent_by_uuid(conn, ch.agent);
      }
      if (!agent) {
        return fail(errc::invalid_argument,
                    fmt::format("channel '{}': no agent '{}'", ch.name, ch.agent));
      }
      if (auto ok = upsert_declared_channel(conn, declared_channel_record(ch, agent->id)); !ok) {
        return tl::unexpected(ok.error());
      }
    }
    return channels.size();
  });
}

expected<row_id> ensure_channel_user(connection& c, std::string_view identity) {
  if (auto ok = c.run("INSERT INTO users (name, display_name, role, created_at) "
                      "VALUES (?, ?, 'user', ?) ON CONFLICT (name) DO NOTHING",
                      identity, identity, now_millis());
      !ok) {
    return tl::unexpected(ok.error());
  }
  return c.query_int("SELECT id FROM users WHERE name = ?", identity);
}

// --- threads ---

expected<channel_thread_record> bind_channel_thread(connection& c, channel_thread_record r) {
  const auto t = stamp(r.created_at);
  if (auto ok =
          c.run("INSERT INTO channel_threads (channel_id, thread_key, owner_user_id, "
                "conversation_id, reply_to, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (channel_id, thread_key) DO NOTHING",
                r.channel_id, r.thread_key, r.owner_user_id, r.conversation_id, r.reply_to, t, t);
      !ok) {
    return tl::unexpected(ok.error());
  }
  return find_channel_thread(c, r.channel_id, r.thread_key);
}

expected<void> set_thread_conversation(connection& c, row_id id, row_id conversation_id) {
  return change_one(c, "channel thread", id,
                    "UPDATE channel_threads SET conversation_id = ?, updated_at = ? WHERE id = ?",
                    conversation_id, now_millis(), id);
}

expected<void> set_thread_binding(connection& c, row_id id, row_id owner_user_id,
                                  row_id conversation_id) {
  return change_one(c, "channel thread", id,
                    "UPDATE channel_threads SET owner_user_id = ?, conversation_id = ?, "
                    "updated_at = ? WHERE id = ?",
                    owner_user_id, conversation_id, now_millis(), id);
}

expected<channel_thread_record> find_channel_thread(connection& c, row_id channel_id,
                                                    std::string_view thread_key) {
  static const auto sql =
      select(thread_columns, "channel_threads", "WHERE channel_id = ? AND thread_key = ?");
  return query_one<channel_thread_record>(c, "channel thread", sql, read_thread, channel_id,
                                          thread_key);
}

expected<channel_thread_record> find_channel_thread_by_id(connection& c, row_id id) {
  static const auto sql = select(thread_columns, "channel_threads", "WHERE id = ?");
  return query_one<channel_thread_record>(c, "channel thread", sql, read_thread, id);
}

expected<std::vector<channel_thread_record>>
list_channel_threads(connection& c, row_id channel_id, std::int64_t limit, std::int64_t offset) {
  static const auto sql = select(thread_columns, "channel_threads",
                                 "WHERE channel_id = ? ORDER BY updated_at DESC, id DESC "
                                 "LIMIT ? OFFSET ?");
  return query_all<channel_thread_record>(c, sql, read_thread, channel_id, limit, offset);
}

// --- the inbound journal ---

expected<journal_result> journal_inbound(connection& c, inbound_record r) {
  const auto received_at = stamp(r.received_at);
  if (!r.delivery_id.empty()) {
    // The second key: a delivery seen lately is a duplicate; an old one gives its id up
    // (Telegram's update ids start again after a week without updates).
    auto seen = c.query_int("SELECT id FROM inbound_journal WHERE channel_id = ? AND "
                            "delivery_id = ? AND received_at >= ?",
                            r.channel_id, r.delivery_id, received_at - delivery_key_lifetime_ms);
    if (seen) {
      return journal_result{*seen, true};
    }
    if (seen.error().code != errc::not_found) {
      return tl::unexpected(seen.error());
    }
    if (auto ok = c.run("UPDATE inbound_journal SET delivery_id = NULL WHERE channel_id = ? AND "
                        "delivery_id = ?",
                        r.channel_id, r.delivery_id);
        !ok) {
      return tl::unexpected(ok.error());
    }
  }
  std::optional<std::string> delivery;
  if (!r.delivery_id.empty()) {
    delivery = r.delivery_id;
  }
  auto inserted = c.query_int(
      "INSERT INTO inbound_journal (channel_id, platform_message_id, thread_key, sender, text, "
      "reply_to, status, run_uuid, received_at, delivery_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
      "ON CONFLICT (channel_id, platform_message_id) DO NOTHING RETURNING id",
      r.channel_id, r.platform_message_id, r.thread_key, r.sender, r.text, r.reply_to, r.status,
      r.run_uuid, received_at, delivery);
  if (inserted) {
    return journal_result{*inserted, false};
  }
  if (inserted.error().code != errc::not_found) {
    return tl::unexpected(inserted.error());
  }
  auto existing =
      c.query_int("SELECT id FROM inbound_journal WHERE channel_id = ? AND platform_message_id = ?",
                  r.channel_id, r.platform_message_id);
  if (!existing) {
    return tl::unexpected(existing.error());
  }
  return journal_result{*existing, true};
}

expected<void> set_inbound_status(connection& c, row_id id, std::string_view status,
                                  std::string_view run_uuid) {
  return change_one(c, "inbound message", id,
                    "UPDATE inbound_journal SET status = ?1, "
                    "run_uuid = CASE WHEN ?2 = '' THEN run_uuid ELSE ?2 END WHERE id = ?3",
                    status, run_uuid, id);
}

expected<inbound_record> find_inbound(connection& c, row_id id) {
  static const auto sql = select(inbound_columns, "inbound_journal", "WHERE id = ?");
  return query_one<inbound_record>(c, "inbound message", sql, read_inbound, id);
}

expected<inbound_record> find_inbound_by_run(connection& c, std::string_view run_uuid) {
  static const auto sql =
      select(inbound_columns, "inbound_journal", "WHERE run_uuid = ? ORDER BY id LIMIT 1");
  return query_one<inbound_record>(c, "inbound message", sql, read_inbound, run_uuid);
}

expected<std::vector<inbound_record>> list_inbound(connection& c, row_id channel_id,
                                                   std::string_view status) {
  static const auto sql = select(inbound_columns, "inbound_journal",
                                 "WHERE (?1 = 0 OR channel_id = ?1) AND status = ?2 ORDER BY id");
  return query_all<inbound_record>(c, sql, read_inbound, channel_id, status);
}

expected<std::int64_t> count_inbound(connection& c, row_id channel_id) {
  return c.query_int("SELECT COUNT(*) FROM inbound_journal WHERE channel_id = ?", channel_id);
}

expected<inbound_counts> count_inbound_by_status(connection& c, row_id channel_id) {
  auto st = c.prepare(
      "SELECT status, COUNT(*) FROM inbound_journal WHERE channel_id = ? GROUP BY status");
  if (!st) {
    return tl::unexpected(st.error());
  }
  if (auto bound = st->bind_all(channel_id); !bound) {
    return tl::unexpected(bound.error());
  }
  inbound_counts out;
  while (true) {
    auto row = st->step();
    if (!row) {
      return tl::unexpected(row.error());
    }
    if (!*row) {
      break;
    }
    const auto status = st->text(0);
    const auto n = st->int64(1);
    (status == "received"     ? out.received
     : status == "processing" ? out.processing
     : status == "done"       ? out.done
                              : out.dead) += n;
    out.total += n;
  }
  return out;
}

// --- the outbox ---

expected<row_id> enqueue_outbox(connection& c, outbox_record r) {
  const auto t = stamp(r.created_at);
  auto inserted =
      c.query_int("INSERT INTO outbox (channel_id, thread_id, run_uuid, part, text, status, "
                  "next_attempt_at, created_at, updated_at, reply_to, preview) "
                  "VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?) "
                  "ON CONFLICT (run_uuid, part) DO NOTHING RETURNING id",
                  r.channel_id, r.thread_id, r.run_uuid, r.part, r.text, r.next_attempt_at, t, t,
                  r.reply_to, r.preview);
  if (inserted || inserted.error().code != errc::not_found) {
    return inserted;
  }
  return c.query_int("SELECT id FROM outbox WHERE run_uuid = ? AND part = ?", r.run_uuid, r.part);
}

expected<void> claim_outbox(connection& c, row_id id) {
  if (auto ok = c.run("UPDATE outbox SET status = 'sending', attempts = attempts + 1, "
                      "updated_at = ? WHERE id = ? AND status = 'pending'",
                      now_millis(), id);
      !ok) {
    return ok;
  }
  if (c.changes() == 0) {
    return fail(errc::conflict, fmt::format("outbox entry {} is not pending", id));
  }
  return {};
}

expected<reply_part_recorded> enqueue_reply_part(connection& c, const outbox_record& r) {
  auto existing = find_outbox_part(c, r.run_uuid, r.part);
  if (!existing) {
    if (existing.error().code != errc::not_found) {
      return tl::unexpected(existing.error());
    }
    auto id = enqueue_outbox(c, r);
    if (!id) {
      return tl::unexpected(id.error());
    }
    return reply_part_recorded::queued;
  }
  if (!existing->preview || !existing->edit_status.empty()) {
    // An ordinary part, or a preview that took its final text already: recorded once.
    return reply_part_recorded::existed;
  }
  const auto t = now_millis();
  if (existing->status == "pending" || existing->status == "dead") {
    // Never shown: it goes out with the final text, as any part.
    if (auto ok = c.run("UPDATE outbox SET text = ?, preview = 0, status = 'pending', "
                        "attempts = CASE WHEN status = 'dead' THEN 0 ELSE attempts END, "
                        "next_attempt_at = 0, updated_at = ? WHERE id = ?",
                        r.text, t, existing->id);
        !ok) {
      return tl::unexpected(ok.error());
    }
    return reply_part_recorded::preview_replaced;
  }
  if (auto ok = c.run("UPDATE outbox SET edit_text = ?, edit_status = 'pending', "
                      "edit_attempts = 0, edit_next_at = ?, updated_at = ? WHERE id = ?",
                      r.text, r.edit_next_at, t, existing->id);
      !ok) {
    return tl::unexpected(ok.error());
  }
  return reply_part_recorded::edit_owed;
}

expected<void> mark_outbox_sent(connection& c, row_id id, std::string_view platform_message_id,
                                std::string_view sent_text) {
  const auto t = now_millis();
  return change_one(c, "outbox entry", id,
                    "UPDATE outbox SET status = 'sent', platform_message_id = ?1, sent_at = ?2, "
                    "updated_at = ?2, last_error = '', "
                    "text = CASE WHEN ?3 != '' THEN ?3 ELSE text END, "
                    "edit_status = CASE WHEN edit_status = 'pending' AND edit_text = ?3 "
                    "THEN 'done' ELSE edit_status END WHERE id = ?4",
                    platform_message_id, t, sent_text, id);
}

expected<void> mark_outbox_edited(connection& c, row_id id) {
  return change_one(c, "outbox entry", id,
                    "UPDATE outbox SET edit_status = 'done', text = edit_text, last_error = '', "
                    "updated_at = ? WHERE id = ?",
                    now_millis(), id);
}

expected<void> record_outbox_edit_failure(connection& c, row_id id, std::string_view why,
                                          std::int64_t retry_at, std::int64_t max_attempts,
                                          bool permanent) {
  return change_one(
      c, "outbox entry", id,
      "UPDATE outbox SET edit_attempts = edit_attempts + 1, last_error = ?1, updated_at = ?2, "
      "edit_next_at = ?3, "
      "status = CASE WHEN ?5 OR edit_attempts + 1 >= ?4 THEN 'pending' ELSE status END, "
      "text = CASE WHEN ?5 OR edit_attempts + 1 >= ?4 THEN edit_text ELSE text END, "
      "preview = CASE WHEN ?5 OR edit_attempts + 1 >= ?4 THEN 0 ELSE preview END, "
      "attempts = CASE WHEN ?5 OR edit_attempts + 1 >= ?4 THEN 0 ELSE attempts END, "
      "next_attempt_at = CASE WHEN ?5 OR edit_attempts + 1 >= ?4 THEN 0 ELSE next_attempt_at END, "
      "edit_status = CASE WHEN ?5 OR edit_attempts + 1 >= ?4 THEN 'dead' ELSE edit_status END "
      "WHERE id = ?6",
      why, now_millis(), retry_at, max_attempts, permanent, id);
}

expected<std::vector<outbox_record>> list_outbox_edits(connection& c) {
  static const auto sql = select(outbox_columns, "outbox",
                                 "WHERE edit_status = 'pending' AND status = 'sent' ORDER BY id");
  return query_all<outbox_record>(c, sql, read_outbox);
}

expected<void> record_outbox_failure(connection& c, row_id id, std::string_view error_text,
                                     std::int64_t retry_at, std::int64_t max_attempts) {
  return change_one(c, "outbox entry", id,
                    "UPDATE outbox SET last_error = ?1, next_attempt_at = ?2, updated_at = ?3, "
                    "status = CASE WHEN attempts >= ?4 THEN 'dead' ELSE 'pending' END "
                    "WHERE id = ?5",
                    error_text, retry_at, now_millis(), max_attempts, id);
}

expected<void> mark_outbox_dead(connection& c, row_id id, std::string_view error_text) {
  return change_one(c, "outbox entry", id,
                    "UPDATE outbox SET status = 'dead', last_error = ?, updated_at = ? "
                    "WHERE id = ?",
                    error_text, now_millis(), id);
}

expected<outbox_record> find_outbox(connection& c, row_id id) {
  static const auto sql = select(outbox_columns, "outbox", "WHERE id = ?");
  return query_one<outbox_record>(c, "outbox entry", sql, read_outbox, id);
}

expected<outbox_record> find_outbox_part(connection& c, std::string_view run_uuid,
                                         std::int64_t part) {
  static const auto sql = select(outbox_columns, "outbox", "WHERE run_uuid = ? AND part = ?");
  return query_one<outbox_record>(c, "outbox entry", sql, read_outbox, run_uuid, part);
}

expected<std::vector<outbox_record>> list_outbox(connection& c, row_id channel_id,
                                                 std::string_view status) {
  static const auto sql = select(outbox_columns, "outbox",
                                 "WHERE channel_id = ?1 AND (?2 = '' OR status = ?2) ORDER BY id");
  return query_all<outbox_record>(c, sql, read_outbox, channel_id, status);
}

expected<std::vector<outbox_record>> unnotified_dead_letters(connection& c, row_id thread_id) {
  static const auto sql =
      select(outbox_columns, "outbox",
             "WHERE thread_id = ?1 AND status = 'dead' AND id > (SELECT "
             "dead_notified_id FROM channel_threads WHERE id = ?1) ORDER BY id");
  return query_all<outbox_record>(c, sql, read_outbox, thread_id);
}

expected<void> set_dead_letters_notified(connection& c, row_id thread_id, row_id through_id) {
  return change_one(c, "channel thread", thread_id,
                    "UPDATE channel_threads SET dead_notified_id = MAX(dead_notified_id, ?) "
                    "WHERE id = ?",
                    through_id, thread_id);
}

expected<std::vector<outbox_record>> list_outbox_with_status(connection& c,
                                                             std::string_view status) {
  static const auto sql = select(outbox_columns, "outbox", "WHERE status = ? ORDER BY id");
  return query_all<outbox_record>(c, sql, read_outbox, status);
}

} // namespace troupe::storage
