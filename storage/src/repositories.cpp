#include "troupe/storage/repositories.hpp"

#include <algorithm>
#include <array>
#include <chrono>

#include <fmt/format.h>

#include "query.hpp"
#include "troupe/storage/message_index.hpp"

namespace troupe::storage {

using namespace detail;

std::int64_t now_millis() noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

constexpr std::array<std::string_view, 6> run_status_names = {"queued", "running",   "succeeded",
                                                              "failed", "cancelled", "interrupted"};

// --- row readers, one per SELECT column list below ---

constexpr std::string_view user_columns = "id, name, display_name, role, created_at";
user_record read_user(const statement& s) {
  return {s.int64(0), s.text(1), s.text(2), s.text(3), s.int64(4)};
}

constexpr std::string_view token_columns =
    "id, user_id, name, token_hash, created_at, last_used_at, revoked_at, scope, agent_id";
api_token_record read_token(const statement& s) {
  return {s.int64(0),          s.int64(1),          s.text(2), s.text(3),          s.int64(4),
          s.optional_int64(5), s.optional_int64(6), s.text(7), s.optional_int64(8)};
}

constexpr std::string_view provider_columns =
    "id, name, kind, base_url, api_key_ref, config_json, created_at, api_key";
provider_record read_provider(const statement& s) {
  return {s.int64(0), s.text(1), s.text(2), s.text(3), s.text(4), s.text(5), s.int64(6), s.text(7)};
}

constexpr std::string_view agent_columns =
    "id, uuid, name, system_prompt, provider_id, main_model, fast_model, fallback_model, "
    "tools_json, limits_json, queue_policy, created_at, updated_at";
agent_record read_agent(const statement& s) {
  return {s.int64(0), s.text(1), s.text(2), s.text(3),  s.optional_int64(4), s.text(5),  s.text(6),
          s.text(7),  s.text(8), s.text(9), s.text(10), s.int64(11),         s.int64(12)};
}

constexpr std::string_view conversation_columns =
    "id, uuid, owner_user_id, agent_id, title, archived, created_at, updated_at, ephemeral";
conversation_record read_conversation(const statement& s) {
  return {s.int64(0),      s.text(1),  s.int64(2), s.int64(3),     s.text(4),
          s.int64(5) != 0, s.int64(6), s.int64(7), s.int64(8) != 0};
}

constexpr std::string_view message_columns =
    "id, conversation_id, owner_user_id, run_id, role, content, tool_calls_json, tool_call_id, "
    "tool_results_json, prompt_tokens, completion_tokens, created_at";
message_record read_message(const statement& s) {
  return {s.int64(0), s.int64(1), s.int64(2), s.optional_int64(3), s.text(4),   s.text(5),
          s.text(6),  s.text(7),  s.text(8),  s.int64(9),          s.int64(10), s.int64(11)};
}

constexpr std::string_view run_columns =
    "id, uuid, conversation_id, agent_id, parent_run_id, status, model, error, created_at, "
    "started_at, finished_at";
run_record read_run(const statement& s) {
  run_record r;
  r.id = s.int64(0);
  r.uuid = s.text(1);
  r.conversation_id = s.int64(2);
  r.agent_id = s.int64(3);
  r.parent_run_id = s.optional_int64(4);
  // The CHECK constraint admits only known names.
  r.status = parse_run_status(s.text(5)).value_or(run_status::failed);
  r.model = s.text(6);
  r.error = s.text(7);
  r.created_at = s.int64(8);
  r.started_at = s.optional_int64(9);
  r.finished_at = s.optional_int64(10);
  return r;
}

constexpr std::string_view step_columns =
    "id, run_id, seq, kind, name, input_json, output_json, status, created_at";
execution_step_record read_step(const statement& s) {
  return {s.int64(0), s.int64(1), s.int64(2), s.text(3), s.text(4),
          s.text(5),  s.text(6),  s.text(7),  s.int64(8)};
}

constexpr std::string_view plan_item_columns =
    "id, plan_id, position, title, status, note, updated_at";
plan_item_record read_plan_item(const statement& s) {
  return {s.int64(0), s.int64(1), s.int64(2), s.text(3), s.text(4), s.text(5), s.int64(6)};
}

constexpr std::string_view file_columns =
    "id, uuid, owner_user_id, conversation_id, run_id, kind, name, mime_type, size_bytes, "
    "sha256, storage_path, created_at";
file_record read_file(const statement& s) {
  return {s.int64(0), s.text(1), s.int64(2), s.optional_int64(3), s.optional_int64(4), s.text(5),
          s.text(6),  s.text(7), s.int64(8), s.text(9),           s.text(10),          s.int64(11)};
}

constexpr std::string_view memory_columns =
    "id, uuid, user_id, agent_id, scope, kind, memory_key, content, summary, importance, "
    "confidence, sensitivity, status, pinned, expires_at, created_at, updated_at";
memory_item_record read_memory(const statement& s) {
  memory_item_record r;
  r.id = s.int64(0);
  r.uuid = s.text(1);
  r.user_id = s.int64(2);
  r.agent_id = s.optional_int64(3);
  r.scope = s.text(4);
  r.kind = s.text(5);
  r.memory_key = s.text(6);
  r.content = s.text(7);
  r.summary = s.text(8);
  r.importance = s.int64(9);
  r.confidence = s.real(10);
  r.sensitivity = s.text(11);
  r.status = s.text(12);
  r.pinned = s.int64(13) != 0;
  r.expires_at = s.optional_int64(14);
  r.created_at = s.int64(15);
  r.updated_at = s.int64(16);
  return r;
}

constexpr std::string_view revision_columns =
    "id, memory_id, action, content, summary, status, actor, created_at";
memory_revision_record read_revision(const statement& s) {
  return {s.int64(0), s.int64(1), s.text(2), s.text(3),
          s.text(4),  s.text(5),  s.text(6), s.int64(7)};
}

constexpr std::string_view evidence_columns =
    "id, memory_id, relation, conversation_id, message_id, run_id, source, created_at";
memory_evidence_record read_evidence(const statement& s) {
  return {s.int64(0),          s.int64(1),          s.text(2), s.optional_int64(3),
          s.optional_int64(4), s.optional_int64(5), s.text(6), s.int64(7)};
}

constexpr std::string_view tool_columns =
    "id, name, kind, description, schema_json, config_json, enabled, created_at, "
    "COALESCE(approval, '')";
tool_record read_tool(const statement& s) {
  return {s.int64(0), s.text(1),       s.text(2),  s.text(3), s.text(4),
          s.text(5),  s.int64(6) != 0, s.int64(7), s.text(8)};
}

constexpr std::string_view mcp_columns =
    "id, name, transport, endpoint, config_json, enabled, created_at";
mcp_server_record read_mcp(const statement& s) {
  return {s.int64(0), s.text(1), s.text(2), s.text(3), s.text(4), s.int64(5) != 0, s.int64(6)};
}

constexpr std::string_view engine_columns =
    "id, name, kind, base_url, api_key_ref, config_json, enabled, is_default, created_at";
search_engine_record read_engine(const statement& s) {
  return {s.int64(0), s.text(1),       s.text(2),       s.text(3), s.text(4),
          s.text(5),  s.int64(6) != 0, s.int64(7) != 0, s.int64(8)};
}

// SELECT <columns> FROM <table> <rest>, built once per call site (the statement cache
// keys on the text, so it is prepared once).

} // namespace

std::string_view to_string(run_status s) noexcept {
  return run_status_names[static_cast<std::size_t>(s)];
}

expected<run_status> parse_run_status(std::string_view text) {
  for (std::size_t i = 0; i < run_status_names.size(); ++i) {
    if (run_status_names[i] == text) {
      return static_cast<run_status>(i);
    }
  }
  return fail(errc::invalid_argument, fmt::format("'{}' is not a run status", text));
}

// --- users and tokens ---

expected<row_id> insert_user(connection& c, user_record r) {
  return insert_row(c,
                    "INSERT INTO users (name, display_name, role, created_at) VALUES (?, ?, ?, ?)",
                    r.name, r.display_name, r.role, stamp(r.created_at));
}

expected<user_record> find_user(connection& c, row_id id) {
  static const auto sql = select(user_columns, "users", "WHERE id = ?");
  return query_one<user_record>(c, "user", sql, read_user, id);
}

expected<user_record> find_user_by_name(connection& c, std::string_view name) {
  static const auto sql = select(user_columns, "users", "WHERE name = ?");
  return query_one<user_record>(c, "user", sql, read_user, name);
}

expected<row_id> insert_api_token(connection& c, api_token_record r) {
  return insert_row(c,
                    "INSERT INTO api_tokens (user_id, name, token_hash, created_at, scope, "
                    "agent_id) VALUES (?, ?, ?, ?, ?, ?)",
                    r.user_id, r.name, r.token_hash, stamp(r.created_at), r.scope, r.agent_id);
}

expected<api_token_record> find_api_token(connection& c, std::string_view token_hash) {
  static const auto sql =
      select(token_columns, "api_tokens", "WHERE token_hash = ? AND revoked_at IS NULL");
  return query_one<api_token_record>(c, "API token", sql, read_token, token_hash);
}

expected<void> revoke_api_token(connection& c, row_id id) {
  return change_one(c, "API token", id,
                    "UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                    now_millis(), id);
}

// --- providers and agents ---

expected<row_id> insert_provider(connection& c, provider_record r) {
  return insert_row(c,
                    "INSERT INTO providers (name, kind, base_url, api_key_ref, config_json, "
                    "created_at, api_key) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    r.name, r.kind, r.base_url, r.api_key_ref, r.config_json, stamp(r.created_at),
                    r.api_key);
}

expected<provider_record> find_provider(connection& c, row_id id) {
  static const auto sql = select(provider_columns, "providers", "WHERE id = ?");
  return query_one<provider_record>(c, "provider", sql, read_provider, id);
}

expected<row_id> insert_agent(connection& c, agent_record r) {
  const auto t = stamp(r.created_at);
  return insert_row(c,
                    "INSERT INTO agents (uuid, name, system_prompt, provider_id, main_model, "
                    "fast_model, fallback_model, tools_json, limits_json, queue_policy, "
                    "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    r.uuid, r.name, r.system_prompt, r.provider_id, r.main_model, r.fast_model,
                    r.fallback_model, r.tools_json, r.limits_json, r.queue_policy, t,
                    r.updated_at != 0 ? r.updated_at : t);
}

expected<agent_record> find_agent(connection& c, row_id id) {
  static const auto sql = select(agent_columns, "agents", "WHERE id = ?");
  return query_one<agent_record>(c, "agent", sql, read_agent, id);
}

expected<agent_record> find_agent_by_uuid(connection& c, std::string_view uuid) {
  static const auto sql = select(agent_columns, "agents", "WHERE uuid = ?");
  return query_one<agent_record>(c, "agent", sql, read_agent, uuid);
}

expected<agent_record> find_agent_by_name(connection& c, std::string_view name) {
  static const auto sql = select(agent_columns, "agents", "WHERE name = ? ORDER BY id LIMIT 1");
  return query_one<agent_record>(c, "agent", sql, read_agent, name);
}

// --- conversations and messages ---

expected<row_id> insert_conversation(connection& c, conversation_record r) {
  const auto t = stamp(r.created_at);
  return insert_row(c,
                    "INSERT INTO conversations (uuid, owner_user_id, agent_id, title, archived, "
                    "created_at, updated_at, ephemeral) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    r.uuid, r.owner_user_id, r.agent_id, r.title, r.archived, t,
                    r.updated_at != 0 ? r.updated_at : t, r.ephemeral);
}

expected<conversation_record> find_conversation(connection& c, row_id id) {
  static const auto sql = select(conversation_columns, "conversations", "WHERE id = ?");
  return query_one<conversation_record>(c, "conversation", sql, read_conversation, id);
}

expected<conversation_record> find_conversation_by_uuid(connection& c, std::string_view uuid,
                                                        row_id owner_user_id) {
  static const auto sql =
      select(conversation_columns, "conversations", "WHERE uuid = ? AND owner_user_id = ?");
  return query_one<conversation_record>(c, "conversation", sql, read_conversation, uuid,
                                        owner_user_id);
}

expected<conversation_record> find_conversation_by_uuid_any_owner(connection& c,
                                                                  std::string_view uuid) {
  static const auto sql = select(conversation_columns, "conversations", "WHERE uuid = ?");
  return query_one<conversation_record>(c, "conversation", sql, read_conversation, uuid);
}

expected<std::vector<conversation_record>> list_conversations(connection& c, row_id owner_user_id,
                                                              std::int64_t limit) {
  static const auto sql = select(conversation_columns, "conversations",
                                 "WHERE owner_user_id = ? ORDER BY updated_at DESC, id DESC "
                                 "LIMIT ?");
  return query_all<conversation_record>(c, sql, read_conversation, owner_user_id, limit);
}

expected<row_id> insert_message(connection& c, message_record r) {
  const auto t = stamp(r.created_at);
  // Above every indexed id, so the store writer indexes it (message_index.hpp).
  auto id = next_message_id(c);
  if (!id) {
    return id;
  }
  auto inserted =
      c.run("INSERT INTO messages (id, conversation_id, owner_user_id, run_id, role, content, "
            "tool_calls_json, tool_call_id, tool_results_json, prompt_tokens, completion_tokens, "
            "created_at) VALUES (?1, ?2, (SELECT owner_user_id FROM conversations WHERE id = ?2), "
            "?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            *id, r.conversation_id, r.run_id, r.role, r.content, r.tool_calls_json, r.tool_call_id,
            r.tool_results_json, r.prompt_tokens, r.completion_tokens, t);
  if (!inserted) {
    return tl::unexpected(inserted.error());
  }
  auto touched = c.run("UPDATE conversations SET updated_at = max(updated_at, ?) WHERE id = ?", t,
                       r.conversation_id);
  if (!touched) {
    return tl::unexpected(touched.error());
  }
  return id;
}

expected<std::vector<row_id>> insert_messages(connection& c,
                                              std::span<const message_record> records) {
  // One statement per chunk, parsed once. Ids are given, from next_message_id: above
  // every indexed id, so the store writer indexes them (message_index.hpp).
  constexpr std::size_t chunk = 128;
  constexpr std::string_view head =
      "INSERT INTO messages (id, conversation_id, owner_user_id, run_id, role, content, "
      "tool_calls_json, tool_call_id, tool_results_json, prompt_tokens, completion_tokens, "
      "created_at) VALUES ";
  std::vector<row_id> ids;
  ids.reserve(records.size());
  std::vector<std::pair<row_id, std::int64_t>> touched; // conversation, latest time
  for (std::size_t begin = 0; begin < records.size(); begin += chunk) {
    const auto rows = records.subspan(begin, std::min(chunk, records.size() - begin));
    std::string sql(head);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      sql += i == 0 ? "" : ", ";
      sql += "(?, ?, (SELECT owner_user_id FROM conversations WHERE id = ?), "
             "?, ?, ?, ?, ?, ?, ?, ?, ?)";
    }
    auto st = c.prepare(sql);
    if (!st) {
      return tl::unexpected(st.error());
    }
    auto first_id = next_message_id(c);
    if (!first_id) {
      return tl::unexpected(first_id.error());
    }
    int index = 0;
    row_id next_id = *first_id;
    for (const auto& r : rows) {
      const auto t = stamp(r.created_at);
      ids.push_back(next_id);
      for (auto ok : {st->bind(++index, next_id++), st->bind(++index, r.conversation_id),
                      st->bind(++index, r.conversation_id), st->bind(++index, r.run_id),
                      st->bind(++index, r.role), st->bind(++index, r.content),
                      st->bind(++index, r.tool_calls_json), st->bind(++index, r.tool_call_id),
                      st->bind(++index, r.tool_results_json), st->bind(++index, r.prompt_tokens),
                      st->bind(++index, r.completion_tokens), st->bind(++index, t)}) {
        if (!ok) {
          return tl::unexpected(ok.error());
        }
      }
      auto it = std::find_if(touched.begin(), touched.end(),
                             [&](const auto& p) { return p.first == r.conversation_id; });
      if (it == touched.end()) {
        touched.emplace_back(r.conversation_id, t);
      } else {
        it->second = std::max(it->second, t);
      }
    }
    if (auto ok = st->run(); !ok) {
      return tl::unexpected(ok.error());
    }
  }
  for (const auto& [conversation, t] : touched) {
    auto ok = c.run("UPDATE conversations SET updated_at = max(updated_at, ?) WHERE id = ?", t,
                    conversation);
    if (!ok) {
      return tl::unexpected(ok.error());
    }
  }
  return ids;
}

expected<message_record> find_message(connection& c, row_id id) {
  static const auto sql = select(message_columns, "messages", "WHERE id = ?");
  return query_one<message_record>(c, "message", sql, read_message, id);
}

expected<void> update_message_content(connection& c, row_id id, std::string_view content) {
  return change_one(c, "message", id, "UPDATE messages SET content = ? WHERE id = ?", content, id);
}

expected<void> delete_message(connection& c, row_id id) {
  return change_one(c, "message", id, "DELETE FROM messages WHERE id = ?", id);
}

expected<std::vector<message_record>> list_messages(connection& c, row_id conversation_id,
                                                    std::int64_t limit) {
  static const auto all_sql =
      select(message_columns, "messages", "WHERE conversation_id = ? ORDER BY id");
  static const auto last_sql = fmt::format(
      "SELECT * FROM ({}) ORDER BY id",
      select(message_columns, "messages", "WHERE conversation_id = ? ORDER BY id DESC LIMIT ?"));
  if (limit > 0) {
    return query_all<message_record>(c, last_sql, read_message, conversation_id, limit);
  }
  return query_all<message_record>(c, all_sql, read_message, conversation_id);
}

// --- runs, steps, plans ---

expected<row_id> insert_run(connection& c, run_record r) {
  return insert_row(c,
                    "INSERT INTO runs (uuid, conversation_id, agent_id, parent_run_id, status, "
                    "model, error, created_at, started_at, finished_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    r.uuid, r.conversation_id, r.agent_id, r.parent_run_id, to_string(r.status),
                    r.model, r.error, stamp(r.created_at), r.started_at, r.finished_at);
}

expected<run_record> find_run(connection& c, row_id id) {
  static const auto sql = select(run_columns, "runs", "WHERE id = ?");
  return query_one<run_record>(c, "run", sql, read_run, id);
}

expected<run_record> find_run_by_uuid(connection& c, std::string_view uuid) {
  static const auto sql = select(run_columns, "runs", "WHERE uuid = ?");
  return query_one<run_record>(c, "run", sql, read_run, uuid);
}

expected<void> set_run_status(connection& c, row_id id, run_status status,
                              std::string_view error_text) {
  const auto t = now_millis();
  if (status == run_status::running) {
    return change_one(c, "run", id,
                      "UPDATE runs SET status = ?, started_at = coalesce(started_at, ?) "
                      "WHERE id = ?",
                      to_string(status), t, id);
  }
  if (status == run_status::queued) {
    return change_one(c, "run", id, "UPDATE runs SET status = ? WHERE id = ?", to_string(status),
                      id);
  }
  return change_one(c, "run", id,
                    "UPDATE runs SET status = ?, error = ?, finished_at = ? WHERE id = ?",
                    to_string(status), error_text, t, id);
}

expected<std::vector<run_record>> list_runs_with_status(connection& c, run_status status) {
  static const auto sql = select(run_columns, "runs", "WHERE status = ? ORDER BY id");
  return query_all<run_record>(c, sql, read_run, to_string(status));
}

expected<row_id> append_step(connection& c, execution_step_record r) {
  return insert_row(c,
                    "INSERT INTO execution_steps (run_id, seq, kind, name, input_json, "
                    "output_json, status, created_at) VALUES (?1, (SELECT coalesce(max(seq), 0) "
                    "+ 1 FROM execution_steps WHERE run_id = ?1), ?2, ?3, ?4, ?5, ?6, ?7)",
                    r.run_id, r.kind, r.name, r.input_json, r.output_json, r.status,
                    stamp(r.created_at));
}

expected<std::vector<execution_step_record>> list_steps(connection& c, row_id run_id) {
  static const auto sql = select(step_columns, "execution_steps", "WHERE run_id = ? ORDER BY seq");
  return query_all<execution_step_record>(c, sql, read_step, run_id);
}

expected<std::int64_t> append_run_events(connection& c, std::string_view run_uuid,
                                         std::span<const run_event_view> events) {
  if (events.empty()) {
    return std::int64_t{0};
  }
  auto run = c.query_int("SELECT id FROM runs WHERE uuid = ?", run_uuid);
  if (!run) {
    if (run.error().code == errc::not_found) {
      return std::int64_t{0};
    }
    return tl::unexpected(run.error());
  }
  for (const auto& e : events) {
    if (auto ok = c.run("INSERT INTO run_events (run_id, seq, event, data) VALUES (?, ?, ?, ?)",
                        *run, e.seq, e.event, e.data);
        !ok) {
      return tl::unexpected(ok.error());
    }
  }
  return static_cast<std::int64_t>(events.size());
}

expected<std::vector<run_event_record>> list_run_events(connection& c, row_id run_id,
                                                        std::int64_t after_seq) {
  return query_all<run_event_record>(
      c, "SELECT seq, event, data FROM run_events WHERE run_id = ? AND seq > ? ORDER BY seq",
      [](const statement& s) {
        return run_event_record{s.int64(0), s.text(1), s.text(2)};
      },
      run_id, after_seq);
}

expected<row_id> insert_plan(connection& c, plan_record r) {
  const auto t = stamp(r.created_at);
  return insert_row(c,
                    "INSERT INTO plans (run_id, goal, status, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    r.run_id, r.goal, r.status, t, r.updated_at != 0 ? r.updated_at : t);
}

expected<row_id> insert_plan_item(connection& c, plan_item_record r) {
  return insert_row(c,
                    "INSERT INTO plan_items (plan_id, position, title, status, note, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    r.plan_id, r.position, r.title, r.status, r.note, stamp(r.updated_at));
}

expected<void> set_plan_item_status(connection& c, row_id id, std::string_view status,
                                    std::string_view note) {
  return change_one(c, "plan item", id,
                    "UPDATE plan_items SET status = ?, note = ?, updated_at = ? WHERE id = ?",
                    status, note, now_millis(), id);
}

expected<std::vector<plan_item_record>> list_plan_items(connection& c, row_id plan_id) {
  static const auto sql =
      select(plan_item_columns, "plan_items", "WHERE plan_id = ? ORDER BY position");
  return query_all<plan_item_record>(c, sql, read_plan_item, plan_id);
}

// --- files ---

expected<row_id> insert_file(connection& c, file_record r) {
  return insert_row(c,
                    "INSERT INTO files (uuid, owner_user_id, conversation_id, run_id, kind, name, "
                    "mime_type, size_bytes, sha256, storage_path, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    r.uuid, r.owner_user_id, r.conversation_id, r.run_id, r.kind, r.name,
                    r.mime_type, r.size_bytes, r.sha256, r.storage_path, stamp(r.created_at));
}

expected<file_record> find_file(connection& c, std::string_view uuid, row_id owner_user_id) {
  static const auto sql = select(file_columns, "files", "WHERE uuid = ? AND owner_user_id = ?");
  return query_one<file_record>(c, "file", sql, read_file, uuid, owner_user_id);
}

expected<std::vector<file_record>> list_files(connection& c, row_id owner_user_id) {
  static const auto sql = select(file_columns, "files", "WHERE owner_user_id = ? ORDER BY id");
  return query_all<file_record>(c, sql, read_file, owner_user_id);
}

// --- memory ---

expected<row_id> insert_memory_item(connection& c, memory_item_record r, std::string_view actor) {
  static const auto live_sql =
      select(memory_columns, "memory_items",
             "WHERE user_id = ? AND IFNULL(agent_id, 0) = ? AND scope = ? AND kind = ? AND "
             "memory_key = ? AND status IN ('candidate', 'active')");
  auto live = query_one<memory_item_record>(c, "memory item", live_sql, read_memory, r.user_id,
                                            r.agent_id.value_or(0), r.scope, r.kind, r.memory_key);
  if (live) {
    if (live->content == r.content) {
      return live->id; // identical upsert: no-op
    }
    return fail(errc::conflict,
                fmt::format("a live memory '{}' ({}) already exists with other content; update "
                            "or supersede it instead",
                            r.memory_key, r.kind));
  }
  if (live.error().code != errc::not_found) {
    return tl::unexpected(live.error());
  }
  // Sensitive memories never become active without review (AIClaw §5).
  if (r.sensitivity == "sensitive") {
    r.status = "candidate";
  }
  const auto t = stamp(r.created_at);
  auto id =
      insert_row(c,
                 "INSERT INTO memory_items (uuid, user_id, agent_id, scope, kind, memory_key, "
                 "content, summary, importance, confidence, sensitivity, status, pinned, "
                 "expires_at, created_at, updated_at) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 r.uuid, r.user_id, r.agent_id, r.scope, r.kind, r.memory_key, r.content, r.summary,
                 r.importance, r.confidence, r.sensitivity, r.status, r.pinned, r.expires_at, t, t);
  if (!id) {
    return id;
  }
  auto rev = c.run("INSERT INTO memory_revisions (memory_id, action, content, summary, status, "
                   "actor, created_at) VALUES (?, 'created', ?, ?, ?, ?, ?)",
                   *id, r.content, r.summary, r.status, actor, t);
  if (!rev) {
    return tl::unexpected(rev.error());
  }
  return id;
}

expected<memory_item_record> find_memory_item(connection& c, row_id id) {
  static const auto sql = select(memory_columns, "memory_items", "WHERE id = ?");
  return query_one<memory_item_record>(c, "memory item", sql, read_memory, id);
}

expected<void> set_memory_status(connection& c, row_id id, std::string_view status,
                                 std::string_view action, std::string_view actor) {
  const auto t = now_millis();
  auto ok =
      change_one(c, "memory item", id,
                 "UPDATE memory_items SET status = ?, updated_at = ? WHERE id = ?", status, t, id);
  if (!ok) {
    return ok;
  }
  return c.run("INSERT INTO memory_revisions (memory_id, action, content, summary, status, actor, "
               "created_at) SELECT id, ?, content, summary, status, ?, ? FROM memory_items "
               "WHERE id = ?",
               action, actor, t, id);
}

expected<std::vector<memory_revision_record>> list_memory_revisions(connection& c,
                                                                    row_id memory_id) {
  static const auto sql =
      select(revision_columns, "memory_revisions", "WHERE memory_id = ? ORDER BY id");
  return query_all<memory_revision_record>(c, sql, read_revision, memory_id);
}

expected<row_id> insert_memory_evidence(connection& c, memory_evidence_record r) {
  return insert_row(c,
                    "INSERT INTO memory_evidence (memory_id, relation, conversation_id, "
                    "message_id, run_id, source, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    r.memory_id, r.relation, r.conversation_id, r.message_id, r.run_id, r.source,
                    stamp(r.created_at));
}

expected<std::vector<memory_evidence_record>> list_memory_evidence(connection& c,
                                                                   row_id memory_id) {
  static const auto sql =
      select(evidence_columns, "memory_evidence", "WHERE memory_id = ? ORDER BY id");
  return query_all<memory_evidence_record>(c, sql, read_evidence, memory_id);
}

// --- tools, MCP servers, search engines ---

expected<row_id> insert_tool(connection& c, tool_record r) {
  return insert_row(c,
                    "INSERT INTO tools (name, kind, description, schema_json, config_json, "
                    "enabled, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    r.name, r.kind, r.description, r.schema_json, r.config_json, r.enabled,
                    stamp(r.created_at));
}

expected<tool_record> find_tool(connection& c, std::string_view name) {
  static const auto sql = select(tool_columns, "tools", "WHERE name = ?");
  return query_one<tool_record>(c, "tool", sql, read_tool, name);
}

expected<std::vector<tool_record>> list_tools(connection& c) {
  static const auto sql = select(tool_columns, "tools", "ORDER BY name");
  return query_all<tool_record>(c, sql, read_tool);
}

expected<row_id> insert_mcp_server(connection& c, mcp_server_record r) {
  return insert_row(c,
                    "INSERT INTO mcp_servers (name, transport, endpoint, config_json, enabled, "
                    "created_at) VALUES (?, ?, ?, ?, ?, ?)",
                    r.name, r.transport, r.endpoint, r.config_json, r.enabled, stamp(r.created_at));
}

expected<mcp_server_record> find_mcp_server(connection& c, std::string_view name) {
  static const auto sql = select(mcp_columns, "mcp_servers", "WHERE name = ?");
  return query_one<mcp_server_record>(c, "MCP server", sql, read_mcp, name);
}

expected<std::vector<mcp_server_record>> list_mcp_servers(connection& c) {
  static const auto sql = select(mcp_columns, "mcp_servers", "ORDER BY name");
  return query_all<mcp_server_record>(c, sql, read_mcp);
}

expected<row_id> insert_search_engine(connection& c, search_engine_record r) {
  return insert_row(c,
                    "INSERT INTO search_engines (name, kind, base_url, api_key_ref, config_json, "
                    "enabled, is_default, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    r.name, r.kind, r.base_url, r.api_key_ref, r.config_json, r.enabled,
                    r.is_default, stamp(r.created_at));
}

expected<search_engine_record> find_default_search_engine(connection& c) {
  static const auto sql = select(engine_columns, "search_engines", "WHERE is_default = 1");
  return query_one<search_engine_record>(c, "default search engine", sql, read_engine);
}

expected<std::vector<search_engine_record>> list_search_engines(connection& c) {
  static const auto sql = select(engine_columns, "search_engines", "ORDER BY name");
  return query_all<search_engine_record>(c, sql, read_engine);
}

// --- the API's listings and edits ---

namespace {

expected<page_total> count_of(connection& c, std::string_view sql, auto... args) {
  auto n = c.query_int(sql, args...);
  if (!n) {
    return tl::unexpected(n.error());
  }
  return page_total{*n};
}

} // namespace

expected<std::vector<memory_revision_record>> list_memory_revisions(connection& c, row_id memory_id,
                                                                    page p) {
  static const auto sql = select(revision_columns, "memory_revisions",
                                 "WHERE memory_id = ? ORDER BY id LIMIT ? OFFSET ?");
  return query_all<memory_revision_record>(c, sql, read_revision, memory_id, p.limit, p.offset);
}

expected<page_total> count_memory_revisions(connection& c, row_id memory_id) {
  return count_of(c, "SELECT COUNT(*) FROM memory_revisions WHERE memory_id = ?", memory_id);
}

expected<std::vector<memory_evidence_record>> list_memory_evidence(connection& c, row_id memory_id,
                                                                   page p) {
  static const auto sql = select(evidence_columns, "memory_evidence",
                                 "WHERE memory_id = ? ORDER BY id LIMIT ? OFFSET ?");
  return query_all<memory_evidence_record>(c, sql, read_evidence, memory_id, p.limit, p.offset);
}

expected<page_total> count_memory_evidence(connection& c, row_id memory_id) {
  return count_of(c, "SELECT COUNT(*) FROM memory_evidence WHERE memory_id = ?", memory_id);
}

expected<std::vector<user_record>> list_users(connection& c, page p) {
  static const auto sql = select(user_columns, "users", "ORDER BY id LIMIT ? OFFSET ?");
  return query_all<user_record>(c, sql, read_user, p.limit, p.offset);
}

expected<page_total> count_users(connection& c) {
  return count_of(c, "SELECT COUNT(*) FROM users");
}

expected<std::int64_t> count_live_admin_tokens(connection& c) {
  return c.query_int(
      "SELECT COUNT(*) FROM api_tokens WHERE scope = 'admin' AND revoked_at IS NULL");
}

expected<api_token_record> find_api_token_by_id(connection& c, row_id id) {
  static const auto sql = select(token_columns, "api_tokens", "WHERE id = ?");
  return query_one<api_token_record>(c, "API token", sql, read_token, id);
}

expected<std::vector<api_token_record>> list_api_tokens(connection& c,
                                                        std::optional<row_id> user_id, page p) {
  static const auto sql =
      select(token_columns, "api_tokens",
             "WHERE (?1 IS NULL OR user_id = ?1) ORDER BY id LIMIT ?2 OFFSET ?3");
  return query_all<api_token_record>(c, sql, read_token, user_id, p.limit, p.offset);
}

expected<page_total> count_api_tokens(connection& c, std::optional<row_id> user_id) {
  return count_of(c, "SELECT COUNT(*) FROM api_tokens WHERE (?1 IS NULL OR user_id = ?1)", user_id);
}

expected<std::vector<provider_record>> list_providers(connection& c, page p) {
  static const auto sql = select(provider_columns, "providers", "ORDER BY id LIMIT ? OFFSET ?");
  return query_all<provider_record>(c, sql, read_provider, p.limit, p.offset);
}

expected<page_total> count_providers(connection& c) {
  return count_of(c, "SELECT COUNT(*) FROM providers");
}

expected<void> update_provider(connection& c, const provider_record& r) {
  return change_one(c, "provider", r.id,
                    "UPDATE providers SET name = ?, kind = ?, base_url = ?, api_key_ref = ?, "
                    "config_json = ?, api_key = ? WHERE id = ?",
                    r.name, r.kind, r.base_url, r.api_key_ref, r.config_json, r.api_key, r.id);
}

expected<void> delete_provider(connection& c, row_id id) {
  return change_one(c, "provider", id, "DELETE FROM providers WHERE id = ?", id);
}

expected<std::int64_t> seal_plaintext_provider_keys(connection& c, const secret_box& box) {
  struct plain_key {
    row_id id;
    std::string key;
  };
  // Sealed values start with "v1:"; substr, not LIKE, whose '_' and case rules do not
  // fit a prefix test.
  auto plain = query_all<plain_key>(
      c, "SELECT id, api_key FROM providers WHERE api_key != '' AND substr(api_key, 1, 3) != 'v1:'",
      [](const statement& s) {
        return plain_key{s.int64(0), s.text(1)};
      });
  if (!plain) {
    return tl::unexpected(plain.error());
  }
  if (plain->empty()) {
    return 0;
  }
  // Without secure_delete, SQLite leaves a rewritten value's old bytes in the page's
  // free space, where they survive in the file. PRAGMA takes no bound parameters.
  if (auto on = c.exec("PRAGMA secure_delete = ON"); !on) {
    return tl::unexpected(on.error());
  }
  auto sealed = in_transaction(c, [&](connection& tx) -> expected<std::int64_t> {
    for (const auto& p : *plain) {
      auto value = box.seal(p.key);
      if (!value) {
        return tl::unexpected(value.error());
      }
      if (auto ok = tx.run("UPDATE providers SET api_key = ? WHERE id = ?", *value, p.id); !ok) {
        return tl::unexpected(ok.error());
      }
    }
    return static_cast<std::int64_t>(plain->size());
  });
  auto off = c.exec("PRAGMA secure_delete = OFF");
  if (!sealed) {
    return sealed;
  }
  if (!off) {
    return tl::unexpected(off.error());
  }
  // The WAL still holds page images from before; TRUNCATE copies the new pages into the
  // database file and empties the WAL.
  if (auto ok = c.exec("PRAGMA wal_checkpoint(TRUNCATE)"); !ok) {
    return tl::unexpected(ok.error());
  }
  return sealed;
}

expected<std::vector<agent_record>> list_agents(connection& c, page p) {
  static const auto sql = select(agent_columns, "agents", "ORDER BY id LIMIT ? OFFSET ?");
  return query_all<agent_record>(c, sql, read_agent, p.limit, p.offset);
}

expected<page_total> count_agents(connection& c) {
  return count_of(c, "SELECT COUNT(*) FROM agents");
}

expected<void> update_agent(connection& c, const agent_record& r) {
  return change_one(c, "agent", r.id,
                    "UPDATE agents SET name = ?, system_prompt = ?, provider_id = ?, "
                    "main_model = ?, fast_model = ?, fallback_model = ?, tools_json = ?, "
                    "limits_json = ?, queue_policy = ?, updated_at = ? WHERE id = ?",
                    r.name, r.system_prompt, r.provider_id, r.main_model, r.fast_model,
                    r.fallback_model, r.tools_json, r.limits_json, r.queue_policy, now_millis(),
                    r.id);
}

expected<void> delete_agent(connection& c, row_id id) {
  return change_one(c, "agent", id, "DELETE FROM agents WHERE id = ?", id);
}

expected<std::vector<conversation_record>> list_conversations_page(connection& c,
                                                                   row_id owner_user_id, page p) {
  static const auto sql =
      select(conversation_columns, "conversations",
             "WHERE owner_user_id = ? ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?");
  return query_all<conversation_record>(c, sql, read_conversation, owner_user_id, p.limit,
                                        p.offset);
}

expected<page_total> count_conversations(connection& c, row_id owner_user_id) {
  return count_of(c, "SELECT COUNT(*) FROM conversations WHERE owner_user_id = ?", owner_user_id);
}

expected<bool> has_active_run(connection& c, row_id conversation_id) {
  auto n = c.query_int("SELECT COUNT(*) FROM runs WHERE conversation_id = ? AND status IN "
                       "('queued', 'running')",
                       conversation_id);
  if (!n) {
    return tl::unexpected(n.error());
  }
  return *n > 0;
}

expected<void> delete_conversation(connection& c, row_id id) {
  // Its files go with it (their bytes are removed by the caller, after the commit): the
  // rows would otherwise outlive it with a NULL conversation, pointing at deleted bytes.
  if (auto files = c.run("DELETE FROM files WHERE conversation_id = ?", id); !files) {
    return tl::unexpected(files.error());
  }
  return change_one(c, "conversation", id, "DELETE FROM conversations WHERE id = ?", id);
}

expected<std::vector<std::string>> conversation_file_paths(connection& c, row_id conversation_id) {
  return query_all<std::string>(
      c, "SELECT storage_path FROM files WHERE conversation_id = ? ORDER BY id",
      [](const statement& st) { return st.text(0); }, conversation_id);
}

namespace {

// Ephemeral, idle since before ?, no run queued or running.
constexpr std::string_view expired_ephemeral_condition =
    "ephemeral = 1 AND updated_at < ? AND NOT EXISTS (SELECT 1 FROM runs WHERE "
    "runs.conversation_id = conversations.id AND runs.status IN ('queued', 'running'))";

} // namespace

expected<std::vector<conversation_record>>
expired_ephemeral_conversations(connection& c, std::int64_t idle_since, std::int64_t limit) {
  static const auto sql =
      select(conversation_columns, "conversations",
             fmt::format("WHERE {} ORDER BY updated_at, id LIMIT ?", expired_ephemeral_condition));
  return query_all<conversation_record>(c, sql, read_conversation, idle_since, limit);
}

expected<bool> delete_expired_ephemeral(connection& c, row_id id, std::int64_t idle_since) {
  static const auto sql = fmt::format("SELECT COUNT(*) FROM conversations WHERE id = ? AND {}",
                                      expired_ephemeral_condition);
  auto still = c.query_int(sql, id, idle_since);
  if (!still) {
    return tl::unexpected(still.error());
  }
  if (*still == 0) {
    return false;
  }
  if (auto deleted = delete_conversation(c, id); !deleted) {
    return tl::unexpected(deleted.error());
  }
  return true;
}

expected<file_record> find_file_by_uuid(connection& c, std::string_view uuid) {
  static const auto sql = select(file_columns, "files", "WHERE uuid = ?");
  return query_one<file_record>(c, "file", sql, read_file, uuid);
}

expected<std::vector<file_record>> list_files_page(connection& c, row_id owner_user_id, page p) {
  static const auto sql =
      select(file_columns, "files", "WHERE owner_user_id = ? ORDER BY id DESC LIMIT ? OFFSET ?");
  return query_all<file_record>(c, sql, read_file, owner_user_id, p.limit, p.offset);
}

expected<page_total> count_files(connection& c, row_id owner_user_id) {
  return count_of(c, "SELECT COUNT(*) FROM files WHERE owner_user_id = ?", owner_user_id);
}

expected<std::vector<conversation_file>>
list_conversation_files(connection& c, row_id owner_user_id, row_id conversation_id) {
  static const auto sql = fmt::format(
      "SELECT {}, IFNULL((SELECT uuid FROM runs WHERE runs.id = files.run_id), '') FROM files "
      "WHERE owner_user_id = ? AND conversation_id = ? ORDER BY id",
      file_columns);
  return query_all<conversation_file>(
      c, sql,
      [](const statement& s) {
        return conversation_file{read_file(s), s.text(12)};
      },
      owner_user_id, conversation_id);
}

namespace {

/// The WHERE clause of a user's runs (runs `r` joined with their conversation `c`); the
/// optional conditions compare with NULL when unset, so one statement serves every filter.
constexpr std::string_view user_runs_where =
    "WHERE c.owner_user_id = ?1 AND r.parent_run_id IS NULL "
    "AND (?2 IS NULL OR r.conversation_id = ?2) "
    "AND (?3 = 0 OR r.status IN ('queued', 'running'))";

std::optional<std::int64_t> filter_conversation(const user_run_filter& f) {
  return f.conversation_id ? std::optional<std::int64_t>(*f.conversation_id) : std::nullopt;
}

} // namespace

expected<std::vector<user_run>> list_user_runs(connection& c, const user_run_filter& f, page p) {
  static const auto sql = fmt::format(
      "SELECT r.id, r.uuid, r.conversation_id, r.agent_id, r.parent_run_id, r.status, r.model, "
      "r.error, r.created_at, r.started_at, r.finished_at, c.uuid FROM runs r JOIN "
      "conversations c ON c.id = r.conversation_id {} ORDER BY r.id DESC LIMIT ?4 OFFSET ?5",
      user_runs_where);
  return query_all<user_run>(
      c, sql,
      [](const statement& s) {
        return user_run{read_run(s), s.text(11)};
      },
      f.owner_user_id, filter_conversation(f), std::int64_t{f.active_only ? 1 : 0}, p.limit,
      p.offset);
}

expected<page_total> count_user_runs(connection& c, const user_run_filter& f) {
  static const auto sql =
      fmt::format("SELECT COUNT(*) FROM runs r JOIN conversations c ON c.id = r.conversation_id {}",
                  user_runs_where);
  return count_of(c, sql, f.owner_user_id, filter_conversation(f),
                  std::int64_t{f.active_only ? 1 : 0});
}

expected<std::vector<message_record>> list_messages_page(connection& c, row_id conversation_id,
                                                         page p) {
  static const auto sql =
      select(message_columns, "messages", "WHERE conversation_id = ? ORDER BY id LIMIT ? OFFSET ?");
  return query_all<message_record>(c, sql, read_message, conversation_id, p.limit, p.offset);
}

expected<page_total> count_messages(connection& c, row_id conversation_id) {
  return count_of(c, "SELECT COUNT(*) FROM messages WHERE conversation_id = ?", conversation_id);
}

expected<row_id> final_answer_id(connection& c, row_id run_id) {
  return c.query_int("SELECT IFNULL(MAX(id), 0) FROM messages WHERE run_id = ? AND "
                     "role = 'assistant' AND tool_calls_json = ''",
                     run_id);
}

expected<std::vector<queued_turn>> list_queued_turns(connection& c) {
  auto runs = list_runs_with_status(c, run_status::queued);
  if (!runs) {
    return tl::unexpected(runs.error());
  }
  std::vector<queued_turn> out;
  for (auto& run : *runs) {
    if (run.parent_run_id) {
      continue; // a sub-agent's run goes with its parent
    }
    auto conversation = find_conversation(c, run.conversation_id);
    if (!conversation) {
      return tl::unexpected(conversation.error());
    }
    auto messages = list_messages(c, run.conversation_id);
    if (!messages) {
      return tl::unexpected(messages.error());
    }
    queued_turn t;
    for (const auto& m : *messages) {
      if (m.run_id == run.id && m.role == "user") {
        t.text += (t.text.empty() ? "" : "\n\n") + m.content;
      }
    }
    t.run = std::move(run);
    t.conversation = std::move(*conversation);
    out.push_back(std::move(t));
  }
  return out;
}

expected<std::vector<row_id>> queued_run_ids(connection& c, row_id conversation_id) {
  // A run that waits for a human's approval across a restart (issue 19) resumes with its
  // own messages: they are not history before it either.
  static const auto sql = select(
      run_columns, "runs",
      "WHERE conversation_id = ? AND (status = ? OR (status = ? AND uuid IN (SELECT run_uuid "
      "FROM approvals WHERE status = 'pending'))) ORDER BY id");
  auto runs = query_all<run_record>(c, sql, read_run, conversation_id,
                                    to_string(run_status::queued), to_string(run_status::running));
  if (!runs) {
    return tl::unexpected(runs.error());
  }
  std::vector<row_id> out;
  for (const auto& r : *runs) {
    out.push_back(r.id);
  }
  return out;
}

} // namespace troupe::storage
