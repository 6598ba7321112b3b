#pragma once

/// \file
/// Typed functions for every table: the only place SQL is written. Each takes the
/// connection to use; writes are meant to run on the writer connection (through the
/// store_writer), reads on a read-pool connection. Inserts fill in `created_at` /
/// `updated_at` when they are 0 and return the new row's id. Lookups that find nothing
/// fail with `not_found`; constraint violations fail with `conflict`.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/storage/connection.hpp"
#include "troupe/storage/records.hpp"
#include "troupe/storage/secret_box.hpp"

namespace troupe::storage {

// users and API tokens
expected<row_id> insert_user(connection& c, user_record r);
expected<user_record> find_user(connection& c, row_id id);
expected<user_record> find_user_by_name(connection& c, std::string_view name);
expected<row_id> insert_api_token(connection& c, api_token_record r);
/// The live (not revoked) token with this hash.
expected<api_token_record> find_api_token(connection& c, std::string_view token_hash);
expected<void> revoke_api_token(connection& c, row_id id);

// providers and agents
expected<row_id> insert_provider(connection& c, provider_record r);
expected<provider_record> find_provider(connection& c, row_id id);
expected<row_id> insert_agent(connection& c, agent_record r);
expected<agent_record> find_agent(connection& c, row_id id);
expected<agent_record> find_agent_by_uuid(connection& c, std::string_view uuid);
/// The oldest agent with this name (names are unique for declared agents).
expected<agent_record> find_agent_by_name(connection& c, std::string_view name);

// conversations and messages
expected<row_id> insert_conversation(connection& c, conversation_record r);
expected<conversation_record> find_conversation(connection& c, row_id id);
/// The conversation with this uuid, only if `owner_user_id` owns it (else not_found).
expected<conversation_record> find_conversation_by_uuid(connection& c, std::string_view uuid,
                                                        row_id owner_user_id);
/// The conversation with this uuid whoever owns it (for the runtime, never for a caller).
expected<conversation_record> find_conversation_by_uuid_any_owner(connection& c,
                                                                  std::string_view uuid);
/// The owner's conversations, most recently updated first.
expected<std::vector<conversation_record>> list_conversations(connection& c, row_id owner_user_id,
                                                              std::int64_t limit);
/// Appends a message and touches its conversation's `updated_at`.
expected<row_id> insert_message(connection& c, message_record r);
/// Appends many messages with multi-row statements; returns their ids in input order.
/// All or nothing only inside a transaction (a failing chunk leaves earlier ones).
expected<std::vector<row_id>> insert_messages(connection& c,
                                              std::span<const message_record> records);
expected<message_record> find_message(connection& c, row_id id);
/// Replaces a message's content (the full-text index follows by trigger).
expected<void> update_message_content(connection& c, row_id id, std::string_view content);
expected<void> delete_message(connection& c, row_id id);
/// A conversation's messages in order; the last `limit` when limit > 0.
expected<std::vector<message_record>> list_messages(connection& c, row_id conversation_id,
                                                    std::int64_t limit = 0);

// runs, steps, plans
expected<row_id> insert_run(connection& c, run_record r);
expected<run_record> find_run(connection& c, row_id id);
expected<run_record> find_run_by_uuid(connection& c, std::string_view uuid);
/// Moves a run to `status`, stamping `started_at` (running) or `finished_at` (terminal).
expected<void> set_run_status(connection& c, row_id id, run_status status,
                              std::string_view error_text = {});
expected<std::vector<run_record>> list_runs_with_status(connection& c, run_status status);

/// A run that was accepted (its row and user message stored) but had not started when
/// the process stopped: what start-up hands back to its conversation.
struct queued_turn {
  run_record run;
  conversation_record conversation;
  /// Its user messages, in order, joined by blank lines (several under `collect`).
  std::string text;
};
/// Every queued top-level run, oldest first, with its conversation and text.
expected<std::vector<queued_turn>> list_queued_turns(connection& c);
/// The queued runs of a conversation, and its runs that wait for a human's approval
/// (their messages are not history yet).
expected<std::vector<row_id>> queued_run_ids(connection& c, row_id conversation_id);
/// Appends a step with the run's next sequence number; returns its id.
expected<row_id> append_step(connection& c, execution_step_record r);
expected<std::vector<execution_step_record>> list_steps(connection& c, row_id run_id);
/// Stores journal entries of the run `run_uuid` under their own seqs; returns how many
/// were stored (0 when the run has no row: a run that never got one keeps no events).
expected<std::int64_t> append_run_events(connection& c, std::string_view run_uuid,
                                         std::span<const run_event_view> events);
/// The persisted journal entries of a run with a seq above `after_seq`, in order.
expected<std::vector<run_event_record>> list_run_events(connection& c, row_id run_id,
                                                        std::int64_t after_seq = 0);
expected<row_id> insert_plan(connection& c, plan_record r);
expected<row_id> insert_plan_item(connection& c, plan_item_record r);
/// Fails with `conflict` when another item of the plan is already running.
expected<void> set_plan_item_status(connection& c, row_id id, std::string_view status,
                                    std::string_view note = {});
expected<std::vector<plan_item_record>> list_plan_items(connection& c, row_id plan_id);

// files
expected<row_id> insert_file(connection& c, file_record r);
/// The file with this uuid, only if `owner_user_id` owns it (else not_found).
expected<file_record> find_file(connection& c, std::string_view uuid, row_id owner_user_id);
expected<std::vector<file_record>> list_files(connection& c, row_id owner_user_id);

// memory
/// Inserts a memory item and its `created` revision. A live item (candidate or active)
/// with the same natural key and the same content is a no-op returning its id; with
/// different content it fails with `conflict`.
expected<row_id> insert_memory_item(connection& c, memory_item_record r, std::string_view actor);
expected<memory_item_record> find_memory_item(connection& c, row_id id);
/// Changes status and records a revision with `action`.
expected<void> set_memory_status(connection& c, row_id id, std::string_view status,
                                 std::string_view action, std::string_view actor);
expected<std::vector<memory_revision_record>> list_memory_revisions(connection& c,
                                                                    row_id memory_id);
expected<row_id> insert_memory_evidence(connection& c, memory_evidence_record r);
expected<std::vector<memory_evidence_record>> list_memory_evidence(connection& c, row_id memory_id);

// tools, MCP servers, search engines
expected<row_id> insert_tool(connection& c, tool_record r);
expected<tool_record> find_tool(connection& c, std::string_view name);
expected<std::vector<tool_record>> list_tools(connection& c);
expected<row_id> insert_mcp_server(connection& c, mcp_server_record r);
expected<mcp_server_record> find_mcp_server(connection& c, std::string_view name);
expected<std::vector<mcp_server_record>> list_mcp_servers(connection& c);
expected<row_id> insert_search_engine(connection& c, search_engine_record r);
expected<search_engine_record> find_default_search_engine(connection& c);
expected<std::vector<search_engine_record>> list_search_engines(connection& c);

// the API's listings and edits

/// A window of a listing.
struct page {
  std::int64_t limit = 50;
  std::int64_t offset = 0;
};
/// How many rows a listing has in all.
struct page_total {
  std::int64_t count = 0;
};

/// One page of an item's revisions, oldest first (paged in SQL), and their number.
expected<std::vector<memory_revision_record>> list_memory_revisions(connection& c, row_id memory_id,
                                                                    page p);
expected<page_total> count_memory_revisions(connection& c, row_id memory_id);
/// One page of an item's evidence, oldest first (paged in SQL), and its number.
expected<std::vector<memory_evidence_record>> list_memory_evidence(connection& c, row_id memory_id,
                                                                   page p);
expected<page_total> count_memory_evidence(connection& c, row_id memory_id);
expected<std::vector<user_record>> list_users(connection& c, page p);
expected<page_total> count_users(connection& c);
/// Admin tokens not revoked (0 on first start).
expected<std::int64_t> count_live_admin_tokens(connection& c);
/// A token by id, revoked or not.
expected<api_token_record> find_api_token_by_id(connection& c, row_id id);
/// Tokens of one user, or of everyone when `user_id` is empty.
expected<std::vector<api_token_record>> list_api_tokens(connection& c,
                                                        std::optional<row_id> user_id, page p);
expected<page_total> count_api_tokens(connection& c, std::optional<row_id> user_id);
expected<std::vector<provider_record>> list_providers(connection& c, page p);
expected<page_total> count_providers(connection& c);
/// Rewrites every column but `created_at` of provider `r.id`.
expected<void> update_provider(connection& c, const provider_record& r);
expected<void> delete_provider(connection& c, row_id id);
/// Seals with `box` every provider key still stored in plain text (written before keys
/// were sealed), in one transaction, with SQLite's secure_delete on so the old bytes are
/// overwritten, then checkpoints the WAL so no copy of them stays in it. Run at start,
/// before anything else writes. The number of keys sealed.
expected<std::int64_t> seal_plaintext_provider_keys(connection& c, const secret_box& box);
expected<std::vector<agent_record>> list_agents(connection& c, page p);
expected<page_total> count_agents(connection& c);
/// Rewrites every column but `uuid` and `created_at` of agent `r.id`; stamps `updated_at`.
expected<void> update_agent(connection& c, const agent_record& r);
/// Fails with `conflict` while conversations still use the agent.
expected<void> delete_agent(connection& c, row_id id);
/// The owner's conversations, most recently updated first.
expected<std::vector<conversation_record>> list_conversations_page(connection& c,
                                                                   row_id owner_user_id, page p);
expected<page_total> count_conversations(connection& c, row_id owner_user_id);
/// One page of a user's files, newest first.
expected<std::vector<file_record>> list_files_page(connection& c, row_id owner_user_id, page p);
expected<page_total> count_files(connection& c, row_id owner_user_id);
/// A conversation's files (its uploads attached to messages and its runs' artifacts), oldest
/// first, with the public id of the run that made each (empty for uploads).
struct conversation_file {
  file_record file;
  std::string run_uuid;
};
expected<std::vector<conversation_file>>
list_conversation_files(connection& c, row_id owner_user_id, row_id conversation_id);
/// Which of a user's runs a listing shows: top-level runs (no sub-agent's), of one
/// conversation when `conversation_id` is set, only queued and running ones when
/// `active_only`.
struct user_run_filter {
  row_id owner_user_id = 0;
  std::optional<row_id> conversation_id;
  bool active_only = false;
};
/// A run as a listing shows it, with its conversation's public id.
struct user_run {
  run_record run;
  std::string conversation_uuid;
};
/// One page of a user's runs, newest first.
expected<std::vector<user_run>> list_user_runs(connection& c, const user_run_filter& f, page p);
expected<page_total> count_user_runs(connection& c, const user_run_filter& f);
/// One page of a conversation's messages, oldest first.
expected<std::vector<message_record>> list_messages_page(connection& c, row_id conversation_id,
                                                         page p);
expected<page_total> count_messages(connection& c, row_id conversation_id);
/// The id of run `run_id`'s final answer: its last assistant message without tool calls
/// (0: none yet).
expected<row_id> final_answer_id(connection& c, row_id run_id);
/// Whether a run of the conversation is queued or running.
expected<bool> has_active_run(connection& c, row_id conversation_id);
/// Deletes a conversation with its messages and runs (by cascade) and its files' rows
/// (their bytes and the workspace are the caller's to remove: `conversation_file_paths`
/// first, then `remove_conversation_bytes` after the commit).
expected<void> delete_conversation(connection& c, row_id id);
/// The `storage_path`s (relative to the data directory) of a conversation's files.
expected<std::vector<std::string>> conversation_file_paths(connection& c, row_id conversation_id);
/// Ephemeral conversations last updated before `idle_since` (ms since the epoch) with no
/// queued or running run, least recently updated first, at most `limit`.
expected<std::vector<conversation_record>>
expired_ephemeral_conversations(connection& c, std::int64_t idle_since, std::int64_t limit);
/// Deletes conversation `id` as `delete_conversation` does, but only while it is still an
/// expired ephemeral conversation (a message or run may have come since it was listed);
/// false when it is not (then nothing changed). One transaction with the caller's write.
expected<bool> delete_expired_ephemeral(connection& c, row_id id, std::int64_t idle_since);
/// A file by uuid whoever owns it (for signed links, which carry no token).
expected<file_record> find_file_by_uuid(connection& c, std::string_view uuid);

} // namespace troupe::storage
