#include "troupe/storage/memory.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "query.hpp"
#include "troupe/storage/search.hpp"

namespace troupe::storage {

namespace {

constexpr std::string_view item_columns =
    "m.id, m.uuid, m.user_id, m.agent_id, m.scope, m.kind, m.memory_key, m.content, m.summary, "
    "m.importance, m.confidence, m.sensitivity, m.status, m.pinned, m.expires_at, m.created_at, "
    "m.updated_at, m.superseded_by";

memory_item_record read_item(const statement& s) {
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
  r.superseded_by = s.optional_int64(17);
  return r;
}

template <class... Ts>
expected<std::vector<memory_item_record>> query_items(connection& c, std::string_view sql,
                                                      const Ts&... args) {
  return detail::query_all<memory_item_record>(c, sql, read_item, args...);
}

template <class... Ts>
expected<std::optional<memory_item_record>> query_item(connection& c, std::string_view sql,
                                                       const Ts&... args) {
  auto rows = query_items(c, sql, args...);
  if (!rows) {
    return tl::unexpected(rows.error());
  }
  if (rows->empty()) {
    return std::optional<memory_item_record>{};
  }
  return std::optional<memory_item_record>{std::move(rows->front())};
}

expected<void> add_revision(connection& c, row_id id, std::string_view action,
                            std::string_view actor, std::int64_t t) {
  return c.run("INSERT INTO memory_revisions (memory_id, action, content, summary, status, actor, "
               "created_at) SELECT id, ?, content, summary, status, ?, ? FROM memory_items "
               "WHERE id = ?",
               action, actor, t, id);
}

expected<void> add_source(connection& c, row_id id, const memory_proposal& p, std::int64_t t) {
  if (!p.conversation_id && !p.message_id && !p.run_id && p.source.empty()) {
    return {};
  }
  auto message = p.message_id;
  if (!message && p.run_id && p.conversation_id) {
    // A run's proposal comes from the message that started the run: its user message
    // (stored before any write of the run, so it is there in this transaction). Found
    // through the conversation's index: messages have none by run.
    auto first = c.query_int("SELECT IFNULL((SELECT id FROM messages WHERE conversation_id = ? "
                             "AND run_id = ? AND role = 'user' ORDER BY id LIMIT 1), 0)",
                             *p.conversation_id, *p.run_id);
    if (!first) {
      return tl::unexpected(first.error());
    }
    if (*first != 0) {
      message = *first;
    }
  }
  return c.run("INSERT INTO memory_evidence (memory_id, relation, conversation_id, message_id, "
               "run_id, source, created_at) VALUES (?, 'source', ?, ?, ?, ?, ?)",
               id, p.conversation_id, message, p.run_id, p.source, t);
}

// Marks `id` superseded by `successor` (in two steps: the successor's insert needs the
// old item out of the unique key first).
expected<void> mark_superseded(connection& c, row_id id, std::int64_t t) {
  return c.run("UPDATE memory_items SET status = 'superseded', updated_at = ? WHERE id = ?", t, id);
}

expected<void> link_successor(connection& c, row_id id, row_id successor, std::string_view actor,
                              std::int64_t t) {
  if (auto ok = c.run("UPDATE memory_items SET superseded_by = ? WHERE id = ?", successor, id);
      !ok) {
    return ok;
  }
  return add_revision(c, id, "updated", actor, t);
}

std::string visible_clause(std::string_view agent_param) {
  return fmt::format("(m.scope = 'user' OR (m.scope = 'agent_user' AND m.agent_id = {}))",
                     agent_param);
}

// Words that carry no meaning for recall ("what do I prefer" finds by "prefer").
constexpr std::string_view stop_words[] = {
    "a",    "an",   "the", "and",   "or",    "of",     "to",   "in",     "on",    "at",    "for",
    "is",   "are",  "was", "be",    "do",    "does",   "did",  "i",      "me",    "my",    "you",
    "your", "we",   "our", "it",    "its",   "this",   "that", "what",   "which", "who",   "how",
    "when", "with", "can", "could", "would", "should", "will", "please", "tell",  "about", "as"};

std::vector<std::string> meaningful_terms(std::string_view text) {
  auto terms = query_terms(text);
  std::erase_if(terms, [](const std::string& t) {
    std::string lower(t);
    for (auto& ch : lower) {
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    return std::find(std::begin(stop_words), std::end(stop_words), lower) != std::end(stop_words);
  });
  return terms;
}

std::string quoted_or(const std::vector<std::string>& terms) {
  std::string out;
  for (const auto& t : terms) {
    out += out.empty() ? "\"" : " OR \"";
    out += t;
    out += '"';
  }
  return out;
}

std::string match_expression(row_id user, const std::vector<std::string>& terms) {
  return fmt::format(R"(user_id : "{}" AND {{memory_key content summary}} : ({}))", user,
                     quoted_or(terms));
}

// Live items of the user that `p` could duplicate: found by its words (full-text when
// indexed, else the newest 500).
expected<std::vector<memory_item_record>> duplicate_candidates(connection& c,
                                                               const memory_proposal& p) {
  auto indexed = has_memory_index(c);
  if (!indexed) {
    return tl::unexpected(indexed.error());
  }
  const auto agent = p.agent_id.value_or(0);
  if (*indexed) {
    const auto terms = query_terms(p.content);
    if (terms.empty()) {
      return std::vector<memory_item_record>{};
    }
    static const auto sql = fmt::format(
        "SELECT {} FROM memory_fts JOIN memory_items m ON m.id = memory_fts.rowid "
        "WHERE memory_fts MATCH ?1 AND m.user_id = ?2 AND m.status IN ('candidate', 'active') "
        "AND {} ORDER BY bm25(memory_fts, 0.0, 1.0, 0.5, 0.0) LIMIT 20",
        item_columns, visible_clause("?3"));
    return query_items(c, sql, match_expression(p.user_id, terms), p.user_id, agent);
  }
  static const auto sql =
      fmt::format("SELECT {} FROM memory_items m WHERE m.user_id = ?1 AND m.status IN "
                  "('candidate', 'active') AND {} ORDER BY m.updated_at DESC LIMIT 500",
                  item_columns, visible_clause("?2"));
  return query_items(c, sql, p.user_id, agent);
}

bool same_key(const memory_item_record& m, const memory_proposal& p) {
  return m.scope == p.scope && m.kind == p.kind && m.memory_key == p.key &&
         m.agent_id.value_or(0) == p.agent_id.value_or(0);
}

expected<memory_item_record> reread(connection& c, row_id id) {
  return find_memory(c, id);
}

expected<memory_write_result> propose(connection& c, memory_proposal p) {
  if (auto refused = memory::check_memory(p.content, p.summary)) {
    memory_write_result r;
    r.outcome = memory_outcome::refused;
    r.refusal = std::move(refused);
    return r;
  }
  if (auto valid = validate_proposal(p); !valid) {
    return tl::unexpected(valid.error());
  }
  auto taken = c.query_int("SELECT count(*) FROM memory_items WHERE uuid = ?", p.uuid);
  if (!taken) {
    return tl::unexpected(taken.error());
  }
  if (*taken != 0) {
    return fail(errc::conflict, fmt::format("id: a memory with id {} exists already", p.uuid));
  }
  if (p.scope == "user") {
    // A user-wide memory belongs to no agent; the natural key says so.
    p.agent_id.reset();
  }
  const auto t = now_millis();
  // A run restating what its prompt recalled proposes nothing new.
  if (p.run_id) {
    static const auto used_sql =
        fmt::format("SELECT {} FROM memory_evidence e JOIN memory_items m ON m.id = e.memory_id "
                    "WHERE e.run_id = ? AND e.relation = 'used' AND m.user_id = ? ORDER BY e.id",
                    item_columns);
    auto used = query_items(c, used_sql, *p.run_id, p.user_id);
    if (!used) {
      return tl::unexpected(used.error());
    }
    for (auto& m : *used) {
      if (memory::restates(p.content, m.content, same_key(m, p))) {
        memory_write_result r;
        r.outcome = memory_outcome::recalled;
        r.item = std::move(m);
        return r;
      }
    }
  }
  const bool want_active = p.active && p.sensitivity != "sensitive";
  static const auto key_sql = fmt::format(
      "SELECT {} FROM memory_items m WHERE m.user_id = ? AND IFNULL(m.agent_id, 0) = ? AND "
      "m.scope = ? AND m.kind = ? AND m.memory_key = ? AND m.status IN ('candidate', 'active')",
      item_columns);
  auto live = query_items(c, key_sql, p.user_id, p.agent_id.value_or(0), p.scope, p.kind, p.key);
  if (!live) {
    return tl::unexpected(live.error());
  }
  std::optional<memory_item_record> active;
  std::optional<memory_item_record> candidate;
  for (auto& m : *live) {
    (m.status == "active" ? active : candidate) = std::move(m);
  }
  if (active && active->content == p.content) {
    memory_write_result r;
    r.outcome = memory_outcome::unchanged;
    r.item = std::move(*active);
    return r;
  }
  if (candidate && candidate->content == p.content) {
    if (!want_active) {
      memory_write_result r;
      r.outcome = memory_outcome::unchanged;
      r.item = std::move(*candidate);
      return r;
    }
    // A trusted write of what waits for review approves it.
    memory_change approve;
    approve.what = memory_change::action::review;
    approve.patch.id = candidate->id;
    approve.patch.status = "active";
    approve.patch.actor = p.actor;
    return apply_memory_change(c, approve);
  }
  // A near-duplicate of another live item the user sees is merged into it.
  auto similar = duplicate_candidates(c, p);
  if (!similar) {
    return tl::unexpected(similar.error());
  }
  for (auto& m : *similar) {
    if (same_key(m, p)) {
      continue; // the same key with other words: a new value, superseding below
    }
    if (memory::is_near_duplicate(m.content, p.content)) {
      if (auto ok = add_source(c, m.id, p, t); !ok) {
        return tl::unexpected(ok.error());
      }
      memory_write_result r;
      r.outcome = memory_outcome::merged;
      r.item = std::move(m);
      return r;
    }
  }
  // The item the new value replaces: the active one when it goes active, the waiting
  // candidate either way.
  std::vector<memory_item_record> replaced;
  if (want_active && active) {
    replaced.push_back(*active);
  }
  if (candidate) {
    replaced.push_back(*candidate);
  }
  for (const auto& old : replaced) {
    if (auto ok = mark_superseded(c, old.id, t); !ok) {
      return tl::unexpected(ok.error());
    }
  }
  const std::string status = want_active ? "active" : "candidate";
  auto inserted =
      c.run("INSERT INTO memory_items (uuid, user_id, agent_id, scope, kind, memory_key, content, "
            "summary, importance, confidence, sensitivity, status, pinned, expires_at, "
            "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            p.uuid, p.user_id, p.agent_id, p.scope, p.kind, p.key, p.content, p.summary,
            p.importance, p.confidence, p.sensitivity, status, p.pinned, p.expires_at, t, t);
  if (!inserted) {
    return tl::unexpected(inserted.error());
  }
  const auto id = c.last_insert_id();
  if (auto ok = add_revision(c, id, p.imported ? "imported" : "created", p.actor, t); !ok) {
    return tl::unexpected(ok.error());
  }
  for (const auto& old : replaced) {
    if (auto ok = link_successor(c, old.id, id, p.actor, t); !ok) {
      return tl::unexpected(ok.error());
    }
  }
  if (auto ok = add_source(c, id, p, t); !ok) {
    return tl::unexpected(ok.error());
  }
  auto item = reread(c, id);
  if (!item) {
    return tl::unexpected(item.error());
  }
  memory_write_result r;
  r.outcome = replaced.empty() ? memory_outcome::created : memory_outcome::superseded;
  r.item = std::move(*item);
  if (!replaced.empty()) {
    auto previous = reread(c, replaced.front().id);
    if (!previous) {
      return tl::unexpected(previous.error());
    }
    r.previous = std::move(*previous);
  }
  return r;
}

expected<memory_item_record> owned(connection& c, const memory_patch& patch) {
  auto item = find_memory(c, patch.id);
  if (!item) {
    return item;
  }
  if (patch.user_id != 0 && item->user_id != patch.user_id) {
    return fail(errc::not_found, "no such memory");
  }
  return item;
}

expected<memory_write_result> review(connection& c, const memory_patch& patch) {
  auto item = owned(c, patch);
  if (!item) {
    return tl::unexpected(item.error());
  }
  if (item->status == "superseded" || item->status == "deleted") {
    return fail(errc::conflict,
                fmt::format("the memory is {}; it can no longer be changed", item->status));
  }
  if (patch.status && *patch.status != "active" && *patch.status != "dismissed") {
    return fail(errc::invalid_argument, "status: must be \"active\" (approve) or \"dismissed\"");
  }
  const auto content = patch.content.value_or(item->content);
  const auto summary = patch.summary.value_or(item->summary);
  if (patch.content || patch.summary) {
    if (auto refused = memory::check_memory(content, summary)) {
      memory_write_result r;
      r.outcome = memory_outcome::refused;
      r.refusal = std::move(refused);
      r.item = std::move(*item);
      return r;
    }
  }
  const auto t = now_millis();
  memory_write_result r;
  r.outcome = memory_outcome::updated;
  const bool edits = (patch.content && *patch.content != item->content) ||
                     (patch.summary && *patch.summary != item->summary) ||
                     (patch.pinned && *patch.pinned != item->pinned) ||
                     (patch.expires_at && *patch.expires_at != item->expires_at);
  if (edits) {
    const auto pinned = patch.pinned.value_or(item->pinned);
    const auto expires = patch.expires_at ? *patch.expires_at : item->expires_at;
    if (auto ok = c.run("UPDATE memory_items SET content = ?, summary = ?, pinned = ?, "
                        "expires_at = ?, updated_at = ? WHERE id = ?",
                        content, summary, pinned, expires, t, item->id);
        !ok) {
      return tl::unexpected(ok.error());
    }
    if (auto ok = add_revision(c, item->id, "updated", patch.actor, t); !ok) {
      return tl::unexpected(ok.error());
    }
  }
  if (patch.status && *patch.status != item->status) {
    if (*patch.status == "active") {
      // Approval: the active item of the same key gives way to this one.
      static const auto key_sql = fmt::format(
          "SELECT {} FROM memory_items m WHERE m.user_id = ? AND IFNULL(m.agent_id, 0) = ? AND "
          "m.scope = ? AND m.kind = ? AND m.memory_key = ? AND m.status = 'active' AND m.id != ?",
          item_columns);
      auto current = query_item(c, key_sql, item->user_id, item->agent_id.value_or(0), item->scope,
                                item->kind, item->memory_key, item->id);
      if (!current) {
        return tl::unexpected(current.error());
      }
      if (*current) {
        if (auto ok = mark_superseded(c, (*current)->id, t); !ok) {
          return tl::unexpected(ok.error());
        }
      }
      if (auto ok = c.run("UPDATE memory_items SET status = 'active', updated_at = ? WHERE id = ?",
                          t, item->id);
          !ok) {
        return tl::unexpected(ok.error());
      }
      if (auto ok = add_revision(c, item->id, "approved", patch.actor, t); !ok) {
        return tl::unexpected(ok.error());
      }
      if (*current) {
        if (auto ok = link_successor(c, (*current)->id, item->id, patch.actor, t); !ok) {
          return tl::unexpected(ok.error());
        }
        auto previous = reread(c, (*current)->id);
        if (!previous) {
          return tl::unexpected(previous.error());
        }
        r.previous = std::move(*previous);
      }
      r.outcome = memory_outcome::approved;
    } else {
      if (auto ok = c.run("UPDATE memory_items SET status = 'dismissed', updated_at = ? "
                          "WHERE id = ?",
                          t, item->id);
          !ok) {
        return tl::unexpected(ok.error());
      }
      if (auto ok = add_revision(c, item->id, "dismissed", patch.actor, t); !ok) {
        return tl::unexpected(ok.error());
      }
      r.outcome = memory_outcome::dismissed;
    }
  } else if (!edits) {
    r.outcome = memory_outcome::unchanged;
  }
  auto now = reread(c, item->id);
  if (!now) {
    return tl::unexpected(now.error());
  }
  r.item = std::move(*now);
  return r;
}

expected<memory_write_result> forget(connection& c, const memory_patch& patch) {
  auto item = owned(c, patch);
  if (!item) {
    return tl::unexpected(item.error());
  }
  memory_write_result r;
  if (item->status == "deleted") {
    r.outcome = memory_outcome::unchanged;
    r.item = std::move(*item);
    return r;
  }
  const auto t = now_millis();
  if (auto ok = c.run("UPDATE memory_items SET status = 'deleted', updated_at = ? WHERE id = ?", t,
                      item->id);
      !ok) {
    return tl::unexpected(ok.error());
  }
  if (auto ok = add_revision(c, item->id, "forgotten", patch.actor, t); !ok) {
    return tl::unexpected(ok.error());
  }
  auto now = reread(c, item->id);
  if (!now) {
    return tl::unexpected(now.error());
  }
  r.outcome = memory_outcome::forgotten;
  r.item = std::move(*now);
  return r;
}

// The WHERE clause and its text parameters of a listing (the user is ?1).
struct filter_sql {
  std::string where;
  std::vector<std::string> texts;
};

filter_sql filter_clause(const memory_filter& f) {
  filter_sql out;
  out.where = "m.user_id = ?1";
  int next = 2;
  for (const auto& [column, value] :
       {std::pair<std::string_view, const std::string*>{"m.scope", &f.scope},
        {"m.kind", &f.kind},
        {"m.status", &f.status}}) {
    if (!value->empty()) {
      out.where += fmt::format(" AND {} = ?{}", column, next++);
      out.texts.push_back(*value);
    }
  }
  return out;
}

} // namespace

std::string_view to_string(memory_outcome o) noexcept {
  switch (o) {
    case memory_outcome::created:
      return "created";
    case memory_outcome::superseded:
      return "superseded";
    case memory_outcome::unchanged:
      return "unchanged";
    case memory_outcome::merged:
      return "merged";
    case memory_outcome::recalled:
      return "recalled";
    case memory_outcome::refused:
      return "refused";
    case memory_outcome::approved:
      return "approved";
    case memory_outcome::updated:
      return "updated";
    case memory_outcome::dismissed:
      return "dismissed";
    case memory_outcome::forgotten:
      return "forgotten";
  }
  return "unknown";
}

expected<void> validate_proposal(const memory_proposal& p) {
  if (p.user_id == 0) {
    return fail(errc::invalid_argument, "user: a memory belongs to a user");
  }
  if (!memory::is_scope(p.scope)) {
    return fail(errc::invalid_argument, "scope: must be \"user\" or \"agent_user\"");
  }
  if (!memory::is_kind(p.kind)) {
    return fail(errc::invalid_argument, "kind: must be one of preference, profile, fact, "
                                        "decision, procedure, constraint");
  }
  if (p.scope == "agent_user" && !p.agent_id) {
    return fail(errc::invalid_argument, "agent: scope \"agent_user\" needs an agent");
  }
  if (p.key.empty() || p.key.size() > memory::max_key_bytes) {
    return fail(errc::invalid_argument,
                fmt::format("key: must be 1 to {} bytes", memory::max_key_bytes));
  }
  if (std::any_of(p.key.begin(), p.key.end(),
                  [](char ch) { return std::iscntrl(static_cast<unsigned char>(ch)) != 0; })) {
    return fail(errc::invalid_argument, "key: must not hold control characters");
  }
  if (auto bad = memory::check_text(p.key)) {
    return fail(errc::invalid_argument, fmt::format("key: {}", bad->message));
  }
  if (p.importance < 1 || p.importance > 100) {
    return fail(errc::invalid_argument, "importance: must be 1 to 100");
  }
  if (!(p.confidence >= 0.0 && p.confidence <= 1.0)) {
    return fail(errc::invalid_argument, "confidence: must be 0 to 1");
  }
  if (p.sensitivity != "normal" && p.sensitivity != "sensitive") {
    return fail(errc::invalid_argument, "sensitivity: must be \"normal\" or \"sensitive\"");
  }
  return {};
}

expected<memory_write_result> apply_memory_change(connection& c, const memory_change& change) {
  switch (change.what) {
    case memory_change::action::propose:
      return propose(c, change.proposal);
    case memory_change::action::review:
      return review(c, change.patch);
    case memory_change::action::forget:
      return forget(c, change.patch);
  }
  return fail(errc::invalid_argument, "unknown memory change");
}

write_op memory_change_op(memory_change change, std::shared_ptr<memory_write_result> result) {
  return make_write("memory change",
                    [change = std::move(change),
                     result = std::move(result)](connection& c) -> expected<std::int64_t> {
                      auto done = apply_memory_change(c, change);
                      if (!done) {
                        return tl::unexpected(done.error());
                      }
                      *result = std::move(*done);
                      return result->item.id;
                    });
}

expected<memory_item_record> find_memory_by_uuid(connection& c, std::string_view uuid,
                                                 row_id user_id) {
  static const auto sql =
      fmt::format("SELECT {} FROM memory_items m WHERE m.uuid = ?1 AND (?2 = 0 OR m.user_id = ?2)",
                  item_columns);
  auto item = query_item(c, sql, uuid, user_id);
  if (!item) {
    return tl::unexpected(item.error());
  }
  if (!*item) {
    return fail(errc::not_found, "no such memory");
  }
  return std::move(**item);
}

expected<memory_item_record> find_memory(connection& c, row_id id) {
  static const auto sql = fmt::format("SELECT {} FROM memory_items m WHERE m.id = ?", item_columns);
  auto item = query_item(c, sql, id);
  if (!item) {
    return tl::unexpected(item.error());
  }
  if (!*item) {
    return fail(errc::not_found, "no such memory");
  }
  return std::move(**item);
}

expected<std::vector<memory_item_record>> list_memories(connection& c, const memory_filter& f,
                                                        page p) {
  auto clause = filter_clause(f);
  const auto next = static_cast<int>(clause.texts.size()) + 2;
  if (f.agent_id) {
    clause.where += fmt::format(" AND m.agent_id = {}", *f.agent_id);
  }
  const auto terms = query_terms(f.query);
  auto indexed = has_memory_index(c);
  if (!indexed) {
    return tl::unexpected(indexed.error());
  }
  std::string sql;
  std::string match;
  if (!terms.empty() && *indexed) {
    match = match_expression(f.user_id, terms);
    sql = fmt::format("SELECT {} FROM memory_fts JOIN memory_items m ON m.id = memory_fts.rowid "
                      "WHERE memory_fts MATCH ?{} AND {} ORDER BY bm25(memory_fts, 2.0, 1.0, "
                      "0.5, 0.0), m.id DESC LIMIT ?{} OFFSET ?{}",
                      item_columns, next, clause.where, next + 1, next + 2);
  } else {
    std::string like;
    if (!terms.empty()) {
      // No index: every word must appear in key, content or summary.
      for (std::size_t i = 0; i < terms.size(); ++i) {
        like += fmt::format(" AND (m.memory_key || ' ' || m.content || ' ' || m.summary) LIKE "
                            "'%' || ?{} || '%'",
                            next + 3 + static_cast<int>(i));
      }
    }
    sql = fmt::format("SELECT {} FROM memory_items m WHERE {}{} AND ?{} = ?{} "
                      "ORDER BY m.updated_at DESC, m.id DESC LIMIT ?{} OFFSET ?{}",
                      item_columns, clause.where, like, next, next, next + 1, next + 2);
  }
  auto st = c.prepare(sql);
  if (!st) {
    return tl::unexpected(st.error());
  }
  int index = 1;
  if (auto b = st->bind(index++, f.user_id); !b) {
    return tl::unexpected(b.error());
  }
  for (const auto& t : clause.texts) {
    if (auto b = st->bind(index++, t); !b) {
      return tl::unexpected(b.error());
    }
  }
  if (auto b = st->bind(index++, match); !b) {
    return tl::unexpected(b.error());
  }
  if (auto b = st->bind(index++, p.limit); !b) {
    return tl::unexpected(b.error());
  }
  if (auto b = st->bind(index++, p.offset); !b) {
    return tl::unexpected(b.error());
  }
  if (match.empty()) {
    for (const auto& t : terms) {
      if (auto b = st->bind(index++, t); !b) {
        return tl::unexpected(b.error());
      }
    }
  }
  std::vector<memory_item_record> out;
  for (;;) {
    auto row = st->step();
    if (!row) {
      return tl::unexpected(row.error());
    }
    if (!*row) {
      return out;
    }
    out.push_back(read_item(*st));
  }
}

expected<page_total> count_memories(connection& c, const memory_filter& f) {
  // The count of a query listing is the count of its matches, whatever the page.
  page all;
  all.limit = -1;
  all.offset = 0;
  if (!query_terms(f.query).empty()) {
    auto rows = list_memories(c, f, all);
    if (!rows) {
      return tl::unexpected(rows.error());
    }
    return page_total{static_cast<std::int64_t>(rows->size())};
  }
  auto clause = filter_clause(f);
  if (f.agent_id) {
    clause.where += fmt::format(" AND m.agent_id = {}", *f.agent_id);
  }
  auto st = c.prepare(fmt::format("SELECT COUNT(*) FROM memory_items m WHERE {}", clause.where));
  if (!st) {
    return tl::unexpected(st.error());
  }
  int index = 1;
  if (auto b = st->bind(index++, f.user_id); !b) {
    return tl::unexpected(b.error());
  }
  for (const auto& t : clause.texts) {
    if (auto b = st->bind(index++, t); !b) {
      return tl::unexpected(b.error());
    }
  }
  auto row = st->step();
  if (!row) {
    return tl::unexpected(row.error());
  }
  return page_total{*row ? st->int64(0) : 0};
}

namespace {

// How many indexed items one recall may score by relevance (bm25 reads each matching
// item's sizes and row: about 2 µs apiece). A query's terms are taken rarest first while
// the items holding them stay within this; the common ones left out would add little to
// the ranking (their inverse document frequency is low) and most of the cost.
constexpr std::int64_t recall_rank_budget = 120;
// When even the rarest term is held by more items than the budget, the newest of the
// user's items holding it are ranked by importance instead; this many are looked at.
constexpr std::int64_t recall_newest_window = 200;

// A query term and how many indexed items (of every user) hold it.
struct counted_term {
  std::string text;
  std::int64_t items = 0;
};

// The terms with their item counts, rarest first. A count stops at one past the budget
// (a term over it is only ever a last resort), so counting costs at most that many
// postings per term; fts5vocab would read every posting of a common term. Counted in
// every column (a column filter makes FTS5 decode positions, 5x the cost): a term that is
// also some user's id counts high, which only makes it less likely to be chosen.
expected<std::vector<counted_term>> count_terms(connection& c,
                                                const std::vector<std::string>& terms) {
  std::vector<counted_term> out;
  for (const auto& t : terms) {
    auto items = c.query_int("SELECT count(*) FROM (SELECT rowid FROM memory_fts WHERE memory_fts "
                             "MATCH ?1 LIMIT ?2)",
                             fmt::format(R"("{}")", t), recall_rank_budget + 1);
    if (!items) {
      return tl::unexpected(items.error());
    }
    out.push_back({t, *items});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const counted_term& a, const counted_term& b) { return a.items < b.items; });
  return out;
}

// The user's visible active items matching the query's terms, best first: by bm25 over
// the rarest terms within recall_rank_budget, or, when the rarest term alone is over it,
// the newest items holding that term by importance.
expected<std::vector<memory_item_record>> ranked_recall(connection& c, const recall_query& q,
                                                        const std::vector<std::string>& terms,
                                                        std::int64_t now, row_id agent,
                                                        std::int64_t limit) {
  auto counted = count_terms(c, terms);
  if (!counted) {
    return tl::unexpected(counted.error());
  }
  std::vector<std::string> chosen;
  std::int64_t items = 0;
  for (const auto& t : *counted) {
    if (!chosen.empty() && items + t.items > recall_rank_budget) {
      break;
    }
    chosen.push_back(t.text);
    items += t.items;
  }
  if (items <= recall_rank_budget) {
    static const auto sql =
        fmt::format("SELECT {} FROM memory_fts JOIN memory_items m ON m.id = memory_fts.rowid "
                    "WHERE memory_fts MATCH ?1 AND m.user_id = ?2 AND m.status = 'active' AND "
                    "(m.expires_at IS NULL OR m.expires_at > ?3) AND {} "
                    "ORDER BY bm25(memory_fts, 2.0, 1.0, 0.5, 0.0), m.importance DESC LIMIT ?5",
                    item_columns, visible_clause("?4"));
    return query_items(c, sql, match_expression(q.user_id, chosen), q.user_id, now, agent, limit);
  }
  // FTS5 walks rowids newest first and stops at the window; CROSS JOIN keeps SQLite from
  // driving the join from the user's index instead (every active item of the user).
  static const auto sql =
      fmt::format("SELECT {} FROM (SELECT rowid AS id FROM memory_fts WHERE memory_fts MATCH ?1 "
                  "ORDER BY rowid DESC LIMIT ?6) AS f CROSS JOIN memory_items m ON m.id = f.id "
                  "WHERE m.user_id = ?2 AND m.status = 'active' AND "
                  "(m.expires_at IS NULL OR m.expires_at > ?3) AND {} "
                  "ORDER BY m.importance DESC, m.updated_at DESC LIMIT ?5",
                  item_columns, visible_clause("?4"));
  return query_items(c, sql, match_expression(q.user_id, chosen), q.user_id, now, agent, limit,
                     recall_newest_window);
}

} // namespace

expected<recalled_items> recall_memories(connection& c, const recall_query& q) {
  recalled_items out;
  const auto now = q.now != 0 ? q.now : now_millis();
  const auto agent = q.agent_id.value_or(0);
  const auto max_items = static_cast<std::int64_t>(std::min(q.max_items, memory::max_block_items));
  const auto terms = meaningful_terms(q.text);
  auto indexed = has_memory_index(c);
  if (!indexed) {
    return tl::unexpected(indexed.error());
  }
  if (!terms.empty() && max_items > 0) {
    if (*indexed) {
      auto ranked = ranked_recall(c, q, terms, now, agent, max_items * 2);
      if (!ranked) {
        return tl::unexpected(ranked.error());
      }
      out.ranked = std::move(*ranked);
    } else {
      std::string any;
      for (std::size_t i = 0; i < terms.size(); ++i) {
        any += fmt::format("{}(m.memory_key || ' ' || m.content || ' ' || m.summary) LIKE '%' || "
                           "?{} || '%'",
                           i == 0 ? "" : " OR ", 6 + i);
      }
      auto st = c.prepare(fmt::format(
          "SELECT {} FROM memory_items m WHERE m.user_id = ?1 AND m.status = 'active' AND "
          "(m.expires_at IS NULL OR m.expires_at > ?2) AND {} AND ({}) AND ?3 = ?3 "
          "ORDER BY m.importance DESC, m.updated_at DESC LIMIT ?5",
          item_columns, visible_clause("?4"), any));
      if (!st) {
        return tl::unexpected(st.error());
      }
      if (auto b = st->bind_all(q.user_id, now, 0, agent, max_items * 2); !b) {
        return tl::unexpected(b.error());
      }
      for (std::size_t i = 0; i < terms.size(); ++i) {
        if (auto b = st->bind(static_cast<int>(6 + i), terms[i]); !b) {
          return tl::unexpected(b.error());
        }
      }
      for (;;) {
        auto row = st->step();
        if (!row) {
          return tl::unexpected(row.error());
        }
        if (!*row) {
          break;
        }
        out.ranked.push_back(read_item(*st));
      }
    }
  }
  if (q.max_pinned > 0) {
    static const auto sql = fmt::format(
        "SELECT {} FROM memory_items m INDEXED BY memory_items_pinned WHERE m.user_id = ?1 AND "
        "m.status = 'active' AND m.pinned = 1 AND (m.expires_at IS NULL OR m.expires_at > ?2) AND "
        "{} "
        "ORDER BY m.importance DESC, m.updated_at DESC LIMIT ?4",
        item_columns, visible_clause("?3"));
    auto pinned = query_items(c, sql, q.user_id, now, agent,
                              static_cast<std::int64_t>(q.max_pinned + max_items));
    if (!pinned) {
      return tl::unexpected(pinned.error());
    }
    out.pinned = std::move(*pinned);
  }
  return out;
}

expected<void> record_memory_use(connection& c, std::span<const row_id> memory_ids, row_id run_id,
                                 std::optional<row_id> conversation_id) {
  const auto t = now_millis();
  for (const auto id : memory_ids) {
    if (auto ok = c.run("INSERT INTO memory_evidence (memory_id, relation, conversation_id, "
                        "run_id, created_at) VALUES (?, 'used', ?, ?, ?)",
                        id, conversation_id, run_id, t);
        !ok) {
      return ok;
    }
  }
  return {};
}

expected<bool> has_active_memories(connection& c, row_id user_id) {
  auto n = c.query_int("SELECT EXISTS (SELECT 1 FROM memory_items "
                       "WHERE user_id = ? AND status = 'active')",
                       user_id);
  if (!n) {
    return tl::unexpected(n.error());
  }
  return *n != 0;
}

expected<bool> has_memory_index(connection& c) {
  // The parsed schema, not a query of sqlite_master: recall asks on every run.
  static const std::string name = "memory_fts";
  return c.has_table(name);
}

expected<bool> ensure_memory_index(connection& c) {
  auto exists = has_memory_index(c);
  if (!exists || *exists) {
    return exists;
  }
  if (!connection::fts5_available()) {
    return false;
  }
  // External content, as the messages' index: the owner's id is indexed too, so a recall
  // matches `user_id : "7" AND (...)` and ranks only that user's items.
  constexpr std::string_view sql = R"sql(
CREATE VIRTUAL TABLE memory_fts USING fts5(
  memory_key, content, summary, user_id, content = 'memory_items', content_rowid = 'id',
  tokenize = 'unicode61 remove_diacritics 2');
CREATE TRIGGER memory_fts_insert AFTER INSERT ON memory_items BEGIN
  INSERT INTO memory_fts(rowid, memory_key, content, summary, user_id)
    VALUES (new.id, new.memory_key, new.content, new.summary, new.user_id);
END;
CREATE TRIGGER memory_fts_delete AFTER DELETE ON memory_items BEGIN
  INSERT INTO memory_fts(memory_fts, rowid, memory_key, content, summary, user_id)
    VALUES ('delete', old.id, old.memory_key, old.content, old.summary, old.user_id);
END;
CREATE TRIGGER memory_fts_update AFTER UPDATE OF memory_key, content, summary, user_id
  ON memory_items BEGIN
  INSERT INTO memory_fts(memory_fts, rowid, memory_key, content, summary, user_id)
    VALUES ('delete', old.id, old.memory_key, old.content, old.summary, old.user_id);
  INSERT INTO memory_fts(rowid, memory_key, content, summary, user_id)
    VALUES (new.id, new.memory_key, new.content, new.summary, new.user_id);
END;
INSERT INTO memory_fts(memory_fts) VALUES ('rebuild');
)sql";
  if (auto ok = c.exec(sql); !ok) {
    return tl::unexpected(ok.error());
  }
  return true;
}

} // namespace troupe::storage
