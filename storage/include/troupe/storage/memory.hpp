#pragma once

/// \file
/// The memory repository: a user's durable memory items, their revisions and evidence,
/// under the rules of `runtime/memory_rules.hpp`, and the retrieval that feeds a run's
/// `<memory_context>` block.
///
/// Writes (`apply_memory_change`) run on the writer connection, inside the store_writer's
/// transaction, so each change reads and writes one consistent state:
/// - a proposal whose content is refused (injection, credential, invisible characters)
///   writes nothing and says why;
/// - a proposal may become `active` only when asked (`proposal::active`: the API's
///   upsert, an agent with `memory_autoapprove`) and not sensitive; else it is a
///   `candidate` waiting for review;
/// - the same content again under the same natural key (user, agent, scope, kind, key)
///   is a no-op; a new value supersedes the live item of that key (status `superseded`,
///   `superseded_by` the new item, an `updated` revision); at most one active and one
///   candidate item per natural key (unique indexes);
/// - a near-duplicate of a live item the user can see (any key) is merged into it: no
///   new item, a `source` evidence row on the existing one;
/// - a proposal from a run that restates an item the run was given in its prompt is not
///   written (`recalled`).

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/runtime/memory_rules.hpp"
#include "troupe/storage/connection.hpp"
#include "troupe/storage/records.hpp"
#include "troupe/storage/repositories.hpp"
#include "troupe/storage/write_op.hpp"

namespace troupe::storage {

/// A new value for a memory (the `memory` tool's propose, the API's POST and import).
struct memory_proposal {
  /// The new item's uuid (the caller makes one, or an import keeps the item's): a uuid
  /// that names an item already is a `conflict`.
  std::string uuid;
  row_id user_id = 0;
  /// Required for scope `agent_user`; for scope `user` the agent it came from, if any
  /// (kept only for `agent_user`: a `user` item belongs to no agent).
  std::optional<row_id> agent_id;
  std::string scope = "user";
  std::string kind = "fact";
  std::string key;
  std::string content;
  std::string summary;
  std::int64_t importance = 50;
  double confidence = 0.8;
  std::string sensitivity = "normal";
  bool pinned = false;
  std::optional<std::int64_t> expires_at;
  /// May be written active (still candidate when sensitive).
  bool active = false;
  /// Brought in from elsewhere (the import route): the new item's first revision is
  /// `imported`, not `created`.
  bool imported = false;
  /// Who writes it, for the revision ("user:3", "agent:assistant").
  std::string actor;
  /// Where it came from: a `source` evidence row when any is set. A run's proposal
  /// without a message names the run's user message (the one that started it).
  std::optional<row_id> conversation_id;
  std::optional<row_id> message_id;
  std::optional<row_id> run_id;
  std::string source;
};

/// A review of one item (the API's PATCH); unset fields stay as they are.
struct memory_patch {
  row_id id = 0;
  /// The caller's user: another user's item is `not_found`. 0: any user (admin).
  row_id user_id = 0;
  std::optional<std::string> content;
  std::optional<std::string> summary;
  /// `active` approves (superseding the active item of its key), `dismissed` dismisses.
  std::optional<std::string> status;
  std::optional<bool> pinned;
  /// Set: the new expiry (nullopt inside: none).
  std::optional<std::optional<std::int64_t>> expires_at;
  std::string actor;
};

/// One change, as the per-user memory writer queues it.
struct memory_change {
  enum class action { propose, review, forget };
  action what = action::propose;
  /// The conversation the change comes from (0: none): a conversation about to compact
  /// its context waits for the changes it made (memory writer `settle`).
  row_id conversation = 0;
  memory_proposal proposal;
  /// review and forget (forget uses `id`, `user_id` and `actor` only).
  memory_patch patch;
};

/// What a change did.
enum class memory_outcome {
  /// A new item.
  created,
  /// A new item that superseded the live item of its key (`previous`).
  superseded,
  /// The same content was there already (`item`): nothing written.
  unchanged,
  /// A near-duplicate of `item` (another key, or other words): merged into it.
  merged,
  /// Restates `item`, which the proposing run was given in its prompt: not written.
  recalled,
  /// Refused (`refusal` says why): nothing written.
  refused,
  /// review: approved (made active; `previous` is the item it superseded, if any).
  approved,
  /// review: edited.
  updated,
  /// review: dismissed.
  dismissed,
  /// forget: deleted.
  forgotten,
};

std::string_view to_string(memory_outcome o) noexcept;

struct memory_write_result {
  memory_outcome outcome = memory_outcome::created;
  /// The item written, or the one that made the write unnecessary (empty when refused).
  memory_item_record item;
  std::optional<memory_item_record> previous;
  std::optional<memory::refusal> refusal;
};

/// Fails with `invalid_argument` (naming the field) when the proposal's shape is wrong:
/// unknown kind, scope or sensitivity, an empty or overlong key, `agent_user` without an
/// agent, importance outside 1..100, confidence outside 0..1.
expected<void> validate_proposal(const memory_proposal& p);

/// Applies one change under the rules in the file comment. Run it on the writer
/// connection (the store_writer wraps it in its transaction).
expected<memory_write_result> apply_memory_change(connection& c, const memory_change& change);

/// The change as a write for the store_writer: `result` receives what it did (the
/// writer may apply a write twice when its batch is redone; the last application is the
/// one that committed). The op's id is the item's row (0 when refused).
write_op memory_change_op(memory_change change, std::shared_ptr<memory_write_result> result);

/// The item with `uuid` if `user_id` owns it (0: whoever does), else `not_found`.
expected<memory_item_record> find_memory_by_uuid(connection& c, std::string_view uuid,
                                                 row_id user_id);
/// The item with row `id` (with `superseded_by`).
expected<memory_item_record> find_memory(connection& c, row_id id);

/// A listing's filters; empty ones do not filter.
struct memory_filter {
  row_id user_id = 0;
  std::string scope;
  std::string kind;
  std::string status;
  std::optional<row_id> agent_id;
  /// Words to find in key, content or summary (full-text when the index exists).
  std::string query;
};
/// One page of a user's items, newest change first (best match first with a query).
expected<std::vector<memory_item_record>> list_memories(connection& c, const memory_filter& f,
                                                        page p);
expected<page_total> count_memories(connection& c, const memory_filter& f);

/// What a run's prompt may recall.
struct recall_query {
  row_id user_id = 0;
  /// The run's agent: its `agent_user` items are visible, no other agent's.
  std::optional<row_id> agent_id;
  /// The run's objective.
  std::string text;
  /// Now (ms since the epoch): items that expired by then are left out.
  std::int64_t now = 0;
  std::size_t max_items = 6;
  std::size_t max_pinned = 6;
};
/// The items a prompt may hold: active, unexpired, the user's, scope `user` or this
/// agent's `agent_user`; `ranked` by full-text match against the objective (best first,
/// at most max_items * 2 so the block can drop near-duplicates), `pinned` by importance.
struct recalled_items {
  std::vector<memory_item_record> ranked;
  std::vector<memory_item_record> pinned;
};
expected<recalled_items> recall_memories(connection& c, const recall_query& q);

/// Writes a `used` evidence row per item for run `run_id` (of `conversation_id`).
expected<void> record_memory_use(connection& c, std::span<const row_id> memory_ids, row_id run_id,
                                 std::optional<row_id> conversation_id);

/// Whether `user_id` has any active item (expired or not): one indexed probe.
expected<bool> has_active_memories(connection& c, row_id user_id);

/// Whether the memory full-text index exists (the connection's parsed schema, no query).
expected<bool> has_memory_index(connection& c);
/// Creates the memory full-text index and its triggers when FTS5 is compiled in (and
/// fills it from the existing rows); false when it cannot.
expected<bool> ensure_memory_index(connection& c);

} // namespace troupe::storage
