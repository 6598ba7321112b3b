#include "troupe/storage/schema.hpp"

#include "troupe/storage/memory.hpp"

#include <functional>
#include <vector>

#include <fmt/format.h>

namespace troupe::storage {

namespace {

// Version 1: every table. Times are Unix milliseconds (INTEGER); JSON is TEXT.
constexpr std::string_view schema_v1 = R"sql(
CREATE TABLE users (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  display_name TEXT NOT NULL DEFAULT '',
  role TEXT NOT NULL DEFAULT 'user' CHECK (role IN ('admin', 'user')),
  created_at INTEGER NOT NULL
);
CREATE TABLE api_tokens (
  id INTEGER PRIMARY KEY,
  user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  token_hash TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL,
  last_used_at INTEGER,
  revoked_at INTEGER
);
CREATE INDEX api_tokens_user ON api_tokens(user_id);
CREATE TABLE providers (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL,
  base_url TEXT NOT NULL DEFAULT '',
  api_key_ref TEXT NOT NULL DEFAULT '',
  config_json TEXT NOT NULL DEFAULT '{}',
  created_at INTEGER NOT NULL
);
CREATE TABLE agents (
  id INTEGER PRIMARY KEY,
  uuid TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  system_prompt TEXT NOT NULL DEFAULT '',
  provider_id INTEGER REFERENCES providers(id) ON DELETE SET NULL,
  main_model TEXT NOT NULL,
  fast_model TEXT NOT NULL DEFAULT '',
  fallback_model TEXT NOT NULL DEFAULT '',
  tools_json TEXT NOT NULL DEFAULT '[]',
  limits_json TEXT NOT NULL DEFAULT '{}',
  queue_policy TEXT NOT NULL DEFAULT 'followup'
    CHECK (queue_policy IN ('followup', 'steer', 'interrupt', 'collect')),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE TABLE conversations (
  id INTEGER PRIMARY KEY,
  uuid TEXT NOT NULL UNIQUE,
  owner_user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  agent_id INTEGER NOT NULL REFERENCES agents(id),
  title TEXT NOT NULL DEFAULT '',
  archived INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX conversations_owner ON conversations(owner_user_id, updated_at);
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  uuid TEXT NOT NULL UNIQUE,
  conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
  agent_id INTEGER NOT NULL REFERENCES agents(id),
  parent_run_id INTEGER REFERENCES runs(id) ON DELETE CASCADE,
  status TEXT NOT NULL DEFAULT 'queued'
    CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'interrupted')),
  model TEXT NOT NULL DEFAULT '',
  error TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  started_at INTEGER,
  finished_at INTEGER
);
CREATE INDEX runs_conversation ON runs(conversation_id, id);
CREATE INDEX runs_status ON runs(status);
CREATE TABLE messages (
  id INTEGER PRIMARY KEY,
  conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
  -- The conversation's owner, copied on insert (an owner never changes), so search can
  -- filter by owner inside the full-text index instead of ranking everyone's messages.
  owner_user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,
  role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
  content TEXT NOT NULL DEFAULT '',
  tool_calls_json TEXT NOT NULL DEFAULT '',
  tool_call_id TEXT NOT NULL DEFAULT '',
  tool_results_json TEXT NOT NULL DEFAULT '',
  prompt_tokens INTEGER NOT NULL DEFAULT 0,
  completion_tokens INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL
);
CREATE INDEX messages_conversation ON messages(conversation_id, id);
CREATE INDEX messages_owner ON messages(owner_user_id, id);
CREATE TABLE execution_steps (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  kind TEXT NOT NULL,
  name TEXT NOT NULL DEFAULT '',
  input_json TEXT NOT NULL DEFAULT '',
  output_json TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL DEFAULT 'done',
  created_at INTEGER NOT NULL,
  UNIQUE (run_id, seq)
);
CREATE TABLE plans (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  goal TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'active'
    CHECK (status IN ('active', 'completed', 'failed', 'abandoned')),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE TABLE plan_items (
  id INTEGER PRIMARY KEY,
  plan_id INTEGER NOT NULL REFERENCES plans(id) ON DELETE CASCADE,
  position INTEGER NOT NULL,
  title TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'running', 'completed', 'blocked', 'failed', 'skipped')),
  note TEXT NOT NULL DEFAULT '',
  updated_at INTEGER NOT NULL,
  UNIQUE (plan_id, position)
);
-- At most one running item per plan (AIClaw's invariant, enforced by the database).
CREATE UNIQUE INDEX plan_items_one_running ON plan_items(plan_id) WHERE status = 'running';
CREATE TABLE files (
  id INTEGER PRIMARY KEY,
  uuid TEXT NOT NULL UNIQUE,
  owner_user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  conversation_id INTEGER REFERENCES conversations(id) ON DELETE SET NULL,
  run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,
  kind TEXT NOT NULL CHECK (kind IN ('upload', 'artifact')),
  name TEXT NOT NULL,
  mime_type TEXT NOT NULL DEFAULT 'application/octet-stream',
  size_bytes INTEGER NOT NULL DEFAULT 0,
  sha256 TEXT NOT NULL DEFAULT '',
  storage_path TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX files_owner ON files(owner_user_id, id);
CREATE TABLE memory_items (
  id INTEGER PRIMARY KEY,
  uuid TEXT NOT NULL UNIQUE,
  user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  agent_id INTEGER REFERENCES agents(id) ON DELETE CASCADE,
  scope TEXT NOT NULL CHECK (scope IN ('user', 'agent_user')),
  kind TEXT NOT NULL
    CHECK (kind IN ('preference', 'profile', 'fact', 'decision', 'procedure', 'constraint')),
  memory_key TEXT NOT NULL,
  content TEXT NOT NULL,
  summary TEXT NOT NULL DEFAULT '',
  importance INTEGER NOT NULL DEFAULT 50,
  confidence REAL NOT NULL DEFAULT 0.8,
  sensitivity TEXT NOT NULL DEFAULT 'normal' CHECK (sensitivity IN ('normal', 'sensitive')),
  status TEXT NOT NULL DEFAULT 'candidate'
    CHECK (status IN ('candidate', 'active', 'superseded', 'dismissed', 'deleted')),
  pinned INTEGER NOT NULL DEFAULT 0,
  expires_at INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
-- The natural key among live memories (AIClaw §5).
CREATE UNIQUE INDEX memory_items_natural_key
  ON memory_items(user_id, IFNULL(agent_id, 0), scope, kind, memory_key)
  WHERE status IN ('candidate', 'active');
CREATE TABLE memory_revisions (
  id INTEGER PRIMARY KEY,
  memory_id INTEGER NOT NULL REFERENCES memory_items(id) ON DELETE CASCADE,
  action TEXT NOT NULL
    CHECK (action IN ('created', 'updated', 'approved', 'dismissed', 'forgotten', 'imported')),
  content TEXT NOT NULL,
  summary TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL,
  actor TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX memory_revisions_memory ON memory_revisions(memory_id, id);
CREATE TABLE memory_evidence (
  id INTEGER PRIMARY KEY,
  memory_id INTEGER NOT NULL REFERENCES memory_items(id) ON DELETE CASCADE,
  relation TEXT NOT NULL CHECK (relation IN ('source', 'used')),
  conversation_id INTEGER REFERENCES conversations(id) ON DELETE SET NULL,
  message_id INTEGER REFERENCES messages(id) ON DELETE SET NULL,
  run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,
  source TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL
);
CREATE INDEX memory_evidence_memory ON memory_evidence(memory_id);
CREATE TABLE channels (
  id INTEGER PRIMARY KEY,
  uuid TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  agent_id INTEGER NOT NULL REFERENCES agents(id),
  config_json TEXT NOT NULL DEFAULT '{}',
  enabled INTEGER NOT NULL DEFAULT 1,
  created_at INTEGER NOT NULL
);
CREATE TABLE channel_threads (
  id INTEGER PRIMARY KEY,
  channel_id INTEGER NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
  thread_key TEXT NOT NULL,
  conversation_id INTEGER REFERENCES conversations(id) ON DELETE SET NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  UNIQUE (channel_id, thread_key)
);
CREATE TABLE inbound_journal (
  id INTEGER PRIMARY KEY,
  channel_id INTEGER NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
  platform_message_id TEXT NOT NULL,
  thread_key TEXT NOT NULL DEFAULT '',
  sender TEXT NOT NULL DEFAULT '',
  payload_json TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL DEFAULT 'received'
    CHECK (status IN ('received', 'processing', 'done', 'dead')),
  received_at INTEGER NOT NULL,
  UNIQUE (channel_id, platform_message_id)
);
CREATE INDEX inbound_journal_status ON inbound_journal(status, id);
CREATE TABLE outbox (
  id INTEGER PRIMARY KEY,
  channel_id INTEGER NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
  thread_key TEXT NOT NULL DEFAULT '',
  dedupe_key TEXT NOT NULL,
  payload_json TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'dead')),
  attempts INTEGER NOT NULL DEFAULT 0,
  last_error TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  sent_at INTEGER,
  UNIQUE (channel_id, dedupe_key)
);
CREATE INDEX outbox_pending ON outbox(status, id);
CREATE TABLE tools (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL CHECK (kind IN ('builtin', 'http', 'script', 'mcp')),
  description TEXT NOT NULL DEFAULT '',
  schema_json TEXT NOT NULL DEFAULT '{}',
  config_json TEXT NOT NULL DEFAULT '{}',
  enabled INTEGER NOT NULL DEFAULT 1,
  created_at INTEGER NOT NULL
);
CREATE TABLE mcp_servers (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  transport TEXT NOT NULL CHECK (transport IN ('stdio', 'http')),
  endpoint TEXT NOT NULL,
  config_json TEXT NOT NULL DEFAULT '{}',
  enabled INTEGER NOT NULL DEFAULT 1,
  created_at INTEGER NOT NULL
);
CREATE TABLE search_engines (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL,
  base_url TEXT NOT NULL DEFAULT '',
  api_key_ref TEXT NOT NULL DEFAULT '',
  config_json TEXT NOT NULL DEFAULT '{}',
  enabled INTEGER NOT NULL DEFAULT 1,
  is_default INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX search_engines_one_default ON search_engines(is_default) WHERE is_default = 1;
)sql";

// The FTS5 index over messages, external content (no second copy of the text). It also
// indexes the owner's id, so a search matches `owner_user_id : "42" AND content : (...)`
// and ranks only that user's hits. Unlike AIClaw it has an UPDATE trigger, so an edited
// message is found by its new words.
constexpr std::string_view message_index_sql = R"sql(
CREATE VIRTUAL TABLE messages_fts USING fts5(
  content, owner_user_id, content = 'messages', content_rowid = 'id',
  tokenize = 'unicode61 remove_diacritics 2');
INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');
)sql";

// What keeps the index in step with the messages it holds (schema version 11): the
// progress row and the update and delete triggers, which touch the index only for
// messages at or below `indexed_to` (message_index.hpp). New messages are indexed by the
// store writer in batches, not by a trigger.
constexpr std::string_view message_index_upkeep_sql = R"sql(
CREATE TABLE IF NOT EXISTS fts_progress (
  name TEXT PRIMARY KEY,
  indexed_to INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO fts_progress (name, indexed_to)
  VALUES ('messages', (SELECT coalesce(max(id), 0) FROM messages))
  ON CONFLICT (name) DO NOTHING;
DROP TRIGGER IF EXISTS messages_fts_insert;
DROP TRIGGER IF EXISTS messages_fts_delete;
DROP TRIGGER IF EXISTS messages_fts_update;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
WHEN old.id <= (SELECT indexed_to FROM fts_progress WHERE name = 'messages') BEGIN
  INSERT INTO messages_fts(messages_fts, rowid, content, owner_user_id)
    VALUES ('delete', old.id, old.content, old.owner_user_id);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, owner_user_id ON messages
WHEN old.id <= (SELECT indexed_to FROM fts_progress WHERE name = 'messages') BEGIN
  INSERT INTO messages_fts(messages_fts, rowid, content, owner_user_id)
    VALUES ('delete', old.id, old.content, old.owner_user_id);
  INSERT INTO messages_fts(rowid, content, owner_user_id)
    VALUES (new.id, new.content, new.owner_user_id);
END;
)sql";

/// The progress row and triggers of an existing index (version 11, and whenever the index
/// is created).
expected<void> keep_message_index(connection& c) {
  if (!c.has_table("messages_fts")) {
    return {}; // no FTS5 here: ensure_message_index adds both once it can
  }
  return c.exec(message_index_upkeep_sql);
}

// Version 3: a token's scope (admin | user | agent, the last bound to one agent) and a
// provider key given through the API.
constexpr std::string_view schema_v3 = R"sql(
ALTER TABLE api_tokens ADD COLUMN scope TEXT NOT NULL DEFAULT 'user'
  CHECK (scope IN ('admin', 'user', 'agent'));
ALTER TABLE api_tokens ADD COLUMN agent_id INTEGER REFERENCES agents(id) ON DELETE CASCADE;
ALTER TABLE providers ADD COLUMN api_key TEXT NOT NULL DEFAULT '';
)sql";

// Version 4: every run journal entry under the id (seq) it had live, so a replay after
// the journal left memory, or after a restart, serves the same events and ids. Deleted
// with its run (and so with its conversation).
constexpr std::string_view schema_v4 = R"sql(
CREATE TABLE run_events (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  event TEXT NOT NULL DEFAULT '',
  data TEXT NOT NULL,
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
)sql";

// Version 5: conversations created by the OpenAI-compatible route for one request are
// ephemeral (deleted once idle for api.ephemeral_retention_ms); the index finds them by age.
// The column is added only when missing: a database whose user_version was set back (as
// the run events migration's test does) already has it.
expected<void> apply_schema_v5(connection& c) {
  auto has = c.query_int(
      "SELECT COUNT(*) FROM pragma_table_info('conversations') WHERE name = 'ephemeral'");
  if (!has) {
    return tl::unexpected(has.error());
  }
  if (*has == 0) {
    if (auto added =
            c.exec("ALTER TABLE conversations ADD COLUMN ephemeral INTEGER NOT NULL DEFAULT 0");
        !added) {
      return added;
    }
  }
  return c.exec("CREATE INDEX IF NOT EXISTS conversations_ephemeral ON "
                "conversations(updated_at) WHERE ephemeral = 1");
}

// Version 6: durable memory in use (issue 15). A superseded item names its successor; at
// most one active and one candidate item per natural key (a proposal waits for review
// while the value it would replace stays active); the listings' and the evidence's
// lookups are indexed; and the full-text index of memories (see ensure_memory_index).
expected<void> apply_schema_v6(connection& c) {
  auto has = c.query_int(
      "SELECT COUNT(*) FROM pragma_table_info('memory_items') WHERE name = 'superseded_by'");
  if (!has) {
    return tl::unexpected(has.error());
  }
  if (*has == 0) {
    if (auto added = c.exec("ALTER TABLE memory_items ADD COLUMN superseded_by INTEGER "
                            "REFERENCES memory_items(id) ON DELETE SET NULL");
        !added) {
      return added;
    }
  }
  if (auto ok = c.exec(R"sql(
DROP INDEX IF EXISTS memory_items_natural_key;
CREATE UNIQUE INDEX IF NOT EXISTS memory_items_active_key
  ON memory_items(user_id, IFNULL(agent_id, 0), scope, kind, memory_key) WHERE status = 'active';
CREATE UNIQUE INDEX IF NOT EXISTS memory_items_candidate_key
  ON memory_items(user_id, IFNULL(agent_id, 0), scope, kind, memory_key)
  WHERE status = 'candidate';
CREATE INDEX IF NOT EXISTS memory_items_user ON memory_items(user_id, status, updated_at);
CREATE INDEX IF NOT EXISTS memory_evidence_run ON memory_evidence(run_id, relation);
)sql");
      !ok) {
    return ok;
  }
  auto indexed = ensure_memory_index(c);
  if (!indexed) {
    return tl::unexpected(indexed.error());
  }
  return {};
}

// A recall adds the user's pinned items to the ranked ones; without this index that
// lookup read every active item of the user (memory_recall_bench: ~9,000 rows for a
// user with 10,000 items).
constexpr std::string_view schema_v7 = R"sql(
CREATE INDEX IF NOT EXISTS memory_items_pinned ON memory_items(user_id)
  WHERE pinned = 1 AND status = 'active';
)sql";

// Version 8: channels (issue 17). The tables of version 1 were never written; they are
// replaced: a channel has a unique name and its settings as columns (secrets only as
// variable names or sealed), a thread is owned by its `channel:<name>:<sender>` user,
// the journal keeps the text and the run it went to, and the outbox is keyed by
// (run, part) with an explicit `sending` state (the intent to send, recorded first).
constexpr std::string_view schema_v8 = R"sql(
DROP TABLE IF EXISTS outbox;
DROP TABLE IF EXISTS inbound_journal;
DROP TABLE IF EXISTS channel_threads;
DROP TABLE IF EXISTS channels;
CREATE TABLE channels (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL CHECK (kind IN ('telegram', 'slack', 'webhook')),
  agent_id INTEGER NOT NULL REFERENCES agents(id),
  mode TEXT NOT NULL DEFAULT 'poll' CHECK (mode IN ('poll', 'webhook')),
  token_env TEXT NOT NULL DEFAULT '',
  token TEXT NOT NULL DEFAULT '',
  bot_token_env TEXT NOT NULL DEFAULT '',
  signing_secret_env TEXT NOT NULL DEFAULT '',
  api_base TEXT NOT NULL DEFAULT '',
  session_scope TEXT NOT NULL DEFAULT 'thread'
    CHECK (session_scope IN ('thread', 'sender', 'thread_sender')),
  queue_policy TEXT NOT NULL DEFAULT 'followup'
    CHECK (queue_policy IN ('followup', 'steer', 'interrupt', 'collect')),
  callback_url TEXT NOT NULL DEFAULT '',
  stream_edits INTEGER NOT NULL DEFAULT 0,
  enabled INTEGER NOT NULL DEFAULT 1,
  declared INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE TABLE channel_threads (
  id INTEGER PRIMARY KEY,
  channel_id INTEGER NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
  thread_key TEXT NOT NULL,
  owner_user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  conversation_id INTEGER REFERENCES conversations(id) ON DELETE SET NULL,
  reply_to TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  UNIQUE (channel_id, thread_key)
);
CREATE INDEX channel_threads_recent ON channel_threads(channel_id, updated_at);
CREATE TABLE inbound_journal (
  id INTEGER PRIMARY KEY,
  channel_id INTEGER NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
  platform_message_id TEXT NOT NULL,
  thread_key TEXT NOT NULL DEFAULT '',
  sender TEXT NOT NULL DEFAULT '',
  text TEXT NOT NULL DEFAULT '',
  reply_to TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL DEFAULT 'received'
    CHECK (status IN ('received', 'processing', 'done', 'dead')),
  run_uuid TEXT NOT NULL DEFAULT '',
  received_at INTEGER NOT NULL,
  UNIQUE (channel_id, platform_message_id)
);
CREATE INDEX inbound_journal_status ON inbound_journal(status, id);
CREATE TABLE outbox (
  id INTEGER PRIMARY KEY,
  channel_id INTEGER NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
  thread_id INTEGER NOT NULL REFERENCES channel_threads(id) ON DELETE CASCADE,
  run_uuid TEXT NOT NULL,
  part INTEGER NOT NULL,
  text TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'sending', 'sent', 'dead')),
  attempts INTEGER NOT NULL DEFAULT 0,
  last_error TEXT NOT NULL DEFAULT '',
  next_attempt_at INTEGER NOT NULL DEFAULT 0,
  platform_message_id TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  sent_at INTEGER,
  UNIQUE (run_uuid, part)
);
CREATE INDEX outbox_status ON outbox(status, id);
CREATE INDEX outbox_channel ON outbox(channel_id, status, id);
)sql";

// Version 9: context compression (issue 16). The summaries that stand for a
// conversation's earlier turns in its prompts (storage/context_summaries.hpp); the
// messages they cover stay. Deleted with the conversation.
constexpr std::string_view schema_v9 = R"sql(
CREATE TABLE IF NOT EXISTS context_summaries (
  id INTEGER PRIMARY KEY,
  conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
  run_id INTEGER NOT NULL,
  summary TEXT NOT NULL,
  head_messages INTEGER NOT NULL DEFAULT 0,
  tail_messages INTEGER NOT NULL DEFAULT 0,
  covered_messages INTEGER NOT NULL DEFAULT 0,
  tokens_before INTEGER NOT NULL DEFAULT 0,
  tokens_after INTEGER NOT NULL DEFAULT 0,
  model TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS context_summaries_conversation
  ON context_summaries(conversation_id, id);
)sql";

// Version 10: slash commands of channels (issue 17). Archives: a Markdown summary of
// each channel conversation written without a model (title, goals, tools, decisions),
// owned by the user `channel:<name>:<sender>`, kept when the conversation is left with
// /new and listed by /continue. `dead_notified_id`: the newest dead-lettered outbox
// entry of the thread its user was told about (the notice is given once). The column is
// added only when missing (as for version 5).
constexpr std::string_view schema_v10 = R"sql(
CREATE TABLE IF NOT EXISTS channel_archives (
  id INTEGER PRIMARY KEY,
  owner_user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  conversation_id INTEGER NOT NULL UNIQUE REFERENCES conversations(id) ON DELETE CASCADE,
  title TEXT NOT NULL,
  summary TEXT NOT NULL,
  message_count INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS channel_archives_owner
  ON channel_archives(owner_user_id, updated_at);
)sql";

expected<void> apply_schema_v10(connection& c) {
  auto has = c.query_int("SELECT COUNT(*) FROM pragma_table_info('channel_threads') "
                         "WHERE name = 'dead_notified_id'");
  if (!has) {
    return tl::unexpected(has.error());
  }
  if (*has == 0) {
    if (auto added = c.exec("ALTER TABLE channel_threads ADD COLUMN dead_notified_id INTEGER "
                            "NOT NULL DEFAULT 0");
        !added) {
      return added;
    }
  }
  return c.exec(schema_v10);
}

// Version 11: new messages are indexed by the store writer in batches, off the answer
// path (message_index.hpp); the INSERT trigger goes, and the update and delete triggers
// only touch messages the index holds.

// Version 12: channels, continued (issue 17). The journal's second dedupe key
// (`delivery_id`: Telegram's update_id, Slack's event_id), unique per channel beside the
// platform message id, and an index on its run (a queued run resumed after a restart
// finds its sender). The outbox: where a part goes (`reply_to`, for a sender's
// conversation that spans threads), whether it is a streamed preview (`preview`: part 0
// posted early and edited as tokens arrive), and the final edit it owes (`edit_text`,
// `edit_status` '' | pending | done | dead, with its attempts and next time), so that
// recording a run's final answer never drops its part 0 when a preview holds that key.
// Columns are added only when missing (as for version 5).
expected<void> apply_schema_v12(connection& c) {
  const std::pair<std::string_view, std::string_view> columns[] = {
      {"inbound_journal", "delivery_id TEXT"},
      {"outbox", "reply_to TEXT NOT NULL DEFAULT ''"},
      {"outbox", "preview INTEGER NOT NULL DEFAULT 0"},
      {"outbox", "edit_text TEXT NOT NULL DEFAULT ''"},
      {"outbox", "edit_status TEXT NOT NULL DEFAULT ''"},
      {"outbox", "edit_attempts INTEGER NOT NULL DEFAULT 0"},
      {"outbox", "edit_next_at INTEGER NOT NULL DEFAULT 0"},
  };
  for (const auto& [table, column] : columns) {
    const auto name = column.substr(0, column.find(' '));
    auto has = c.query_int(
        fmt::format("SELECT COUNT(*) FROM pragma_table_info('{}') WHERE name = '{}'", table, name));
    if (!has) {
      return tl::unexpected(has.error());
    }
    if (*has == 0) {
      if (auto added = c.exec(fmt::format("ALTER TABLE {} ADD COLUMN {}", table, column)); !added) {
        return added;
      }
    }
  }
  return c.exec(R"sql(
CREATE UNIQUE INDEX IF NOT EXISTS inbound_journal_delivery
  ON inbound_journal(channel_id, delivery_id) WHERE delivery_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS outbox_edits ON outbox(edit_status) WHERE edit_status = 'pending';
CREATE INDEX IF NOT EXISTS inbound_journal_run ON inbound_journal(run_uuid);
)sql");
}

// Version 13: a context summary's range as message ids (issue 16): the first and last
// stored messages it covers, and those inside the range it does not (a run's objective
// kept after the summary), so a reloaded conversation finds the summary's place whatever
// happened around it (failed runs, history limits). Rows written before keep 0 and are
// read by their head and tail counts. Columns are added only when missing.
expected<void> apply_schema_v13(connection& c) {
  for (const auto& [column, type] : {std::pair<std::string_view, std::string_view>{
                                         "first_message_id", "INTEGER NOT NULL DEFAULT 0"},
                                     {"last_message_id", "INTEGER NOT NULL DEFAULT 0"},
                                     {"kept_message_ids", "TEXT NOT NULL DEFAULT ''"}}) {
    auto has = c.query_int(
        "SELECT COUNT(*) FROM pragma_table_info('context_summaries') WHERE name = ?", column);
    if (!has) {
      return tl::unexpected(has.error());
    }
    if (*has == 0) {
      if (auto added =
              c.exec(fmt::format("ALTER TABLE context_summaries ADD COLUMN {} {}", column, type));
          !added) {
        return added;
      }
    }
  }
  return {};
}

// Migration 14 (issue 22): the channel types of the Chinese platforms and WhatsApp, and
// their keys (one JSON column: channel_config.hpp's channel_platform_keys). SQLite cannot
// change a CHECK constraint, and rebuilding `channels` would cascade-delete its threads,
// journal and outbox (foreign keys are on, and cannot be turned off inside the migration's
// transaction); the constraint's text is replaced in the schema instead, the procedure
// SQLite documents for changes that leave the stored rows valid ("Making Other Kinds Of
// Table Schema Changes", lang_altertable.html), widening a CHECK being one.
expected<void> apply_schema_v14(connection& c) {
  auto has = c.query_int(
      "SELECT COUNT(*) FROM pragma_table_info('channels') WHERE name = 'platform_keys'");
  if (!has) {
    return tl::unexpected(has.error());
  }
  if (*has == 0) {
    if (auto added =
            c.exec("ALTER TABLE channels ADD COLUMN platform_keys TEXT NOT NULL DEFAULT '{}'");
        !added) {
      return added;
    }
  }
  auto version = c.query_int("PRAGMA schema_version");
  if (!version) {
    return tl::unexpected(version.error());
  }
  auto widened = c.exec(fmt::format(R"sql(
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql = replace(sql,
  'CHECK (kind IN (''telegram'', ''slack'', ''webhook''))',
  'CHECK (kind IN (''telegram'', ''slack'', ''webhook'', ''wecom'', ''wechat_mp'', ''whatsapp'', ''feishu'', ''dingtalk''))')
  WHERE type = 'table' AND name = 'channels';
PRAGMA schema_version = {};
PRAGMA writable_schema = OFF;
)sql",
                                    *version + 1));
  if (!widened) {
    return widened;
  }
  auto now = c.query_int("SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND "
                         "name = 'channels' AND sql LIKE '%''wechat_mp''%'");
  if (!now) {
    return tl::unexpected(now.error());
  }
  if (*now != 1) {
    return fail(errc::internal, "the channels table's CHECK on kind was not widened");
  }
  return {};
}

// Version 15 (issue 19): approvals, tool calls waiting for a human, and the decision
// taken on each (final: only a pending row is ever changed); `round_json` holds what the
// paused round had done when the run paused, so that a restart can resume it. And a
// custom tool's own `approval` setting (NULL: none).
constexpr std::string_view schema_v15 = R"sql(
CREATE TABLE IF NOT EXISTS approvals (
  id INTEGER PRIMARY KEY,
  uuid TEXT NOT NULL UNIQUE,
  run_uuid TEXT NOT NULL,
  owner_user_id INTEGER NOT NULL DEFAULT 0,
  agent TEXT NOT NULL DEFAULT '',
  tool TEXT NOT NULL,
  call_id TEXT NOT NULL DEFAULT '',
  arguments TEXT NOT NULL DEFAULT '{}',
  reason TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
  decided_by INTEGER REFERENCES users(id) ON DELETE SET NULL,
  decided_at INTEGER,
  note TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  round_json TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS approvals_pending ON approvals(owner_user_id, id)
  WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS approvals_run ON approvals(run_uuid);
)sql";

expected<void> apply_schema_v15(connection& c) {
  if (auto made = c.exec(schema_v15); !made) {
    return made;
  }
  // Applied again (a database whose version was set back) it finds the column there.
  auto has = c.query_int("SELECT COUNT(*) FROM pragma_table_info('tools') WHERE name = 'approval'");
  if (!has) {
    return tl::unexpected(has.error());
  }
  if (*has > 0) {
    return {};
  }
  return c.exec("ALTER TABLE tools ADD COLUMN approval TEXT CHECK (approval IS NULL OR approval IN "
                "('never', 'agent_initiated', 'always'))");
}

struct migration {
  int version;
  std::string_view description;
  std::function<expected<void>(connection&)> apply;
};

const std::vector<migration>& migrations() {
  static const std::vector<migration> list = {
      {1, "tables", [](connection& c) { return c.exec(schema_v1); }},
      {2, "messages full-text index",
       [](connection& c) -> expected<void> {
         auto ok = ensure_message_index(c);
         if (!ok) {
           return tl::unexpected(ok.error());
         }
         return {};
       }},
      {3, "token scopes and provider keys", [](connection& c) { return c.exec(schema_v3); }},
      {4, "run journal events", [](connection& c) { return c.exec(schema_v4); }},
      {5, "ephemeral conversations", [](connection& c) { return apply_schema_v5(c); }},
      {6, "memory in use", [](connection& c) { return apply_schema_v6(c); }},
      {7, "pinned memories index", [](connection& c) { return c.exec(schema_v7); }},
      {8, "channels, threads, inbound journal and outbox",
       [](connection& c) { return c.exec(schema_v8); }},
      {9, "context summaries", [](connection& c) { return c.exec(schema_v9); }},
      {10, "channel archives and dead-letter notices",
       [](connection& c) { return apply_schema_v10(c); }},
      {11, "messages indexed in batches by the store writer",
       [](connection& c) { return keep_message_index(c); }},
      {12, "channel delivery ids, reply targets and streamed previews",
       [](connection& c) { return apply_schema_v12(c); }},
      {13, "context summary message range", [](connection& c) { return apply_schema_v13(c); }},
      {14, "channel types wecom, wechat_mp, whatsapp (and feishu, dingtalk) and their keys",
       [](connection& c) { return apply_schema_v14(c); }},
      {15, "approvals, and the approval setting of custom tools",
       [](connection& c) { return apply_schema_v15(c); }},
  };
  return list;
}

} // namespace

int latest_schema_version() noexcept {
  return migrations().back().version;
}

expected<int> schema_version(connection& conn) {
  auto v = conn.query_int("PRAGMA user_version");
  if (!v) {
    return tl::unexpected(v.error());
  }
  return static_cast<int>(*v);
}

expected<int> migrate(connection& conn) {
  auto current = schema_version(conn);
  if (!current) {
    return current;
  }
  const int latest = latest_schema_version();
  if (*current > latest) {
    return fail(errc::conflict,
                fmt::format("database {} has schema version {}, newer than this troupe binary "
                            "understands ({}); run a newer troupe or restore a matching backup",
                            conn.path().string(), *current, latest));
  }
  for (const auto& m : migrations()) {
    if (m.version <= *current) {
      continue;
    }
    auto done = in_transaction(conn, [&](connection& c) -> expected<void> {
      if (auto ok = m.apply(c); !ok) {
        return ok;
      }
      // PRAGMA takes no bound parameters; the version is our own integer.
      return c.exec(fmt::format("PRAGMA user_version = {}", m.version));
    });
    if (!done) {
      return fail(done.error().code, fmt::format("migration {} ({}) failed: {}", m.version,
                                                 m.description, done.error().message));
    }
    *current = m.version;
  }
  return *current;
}

expected<bool> has_message_index(connection& conn) {
  // The parsed schema, not a query of sqlite_master: every search asks.
  static const std::string name = "messages_fts";
  return conn.has_table(name);
}

expected<bool> ensure_message_index(connection& conn) {
  auto exists = has_message_index(conn);
  if (!exists || *exists) {
    return exists;
  }
  if (!connection::fts5_available()) {
    return false;
  }
  if (auto ok = conn.exec(message_index_sql); !ok) {
    return tl::unexpected(ok.error());
  }
  // 'rebuild' indexed every message there is: the progress row starts at the newest.
  if (conn.has_table("fts_progress")) {
    if (auto ok = conn.exec("DELETE FROM fts_progress WHERE name = 'messages'"); !ok) {
      return tl::unexpected(ok.error());
    }
  }
  if (auto ok = keep_message_index(conn); !ok) {
    return tl::unexpected(ok.error());
  }
  return true;
}

} // namespace troupe::storage
