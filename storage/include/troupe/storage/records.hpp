#pragma once

/// \file
/// The rows troupe stores, as plain values independent of the database engine. Times are
/// Unix milliseconds; JSON columns hold JSON text; `id` is 0 until the row is stored.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "troupe/runtime/error.hpp"

namespace troupe::storage {

/// A row's primary key.
using row_id = std::int64_t;

/// The current time in Unix milliseconds.
std::int64_t now_millis() noexcept;

/// A run's lifecycle. `interrupted`: the process stopped while it was running.
enum class run_status { queued, running, succeeded, failed, cancelled, interrupted };
std::string_view to_string(run_status s) noexcept;
expected<run_status> parse_run_status(std::string_view text);

/// A login identity that owns conversations, files and memories.
struct user_record {
  row_id id = 0;
  std::string name;
  std::string display_name;
  /// "admin" or "user".
  std::string role = "user";
  std::int64_t created_at = 0;
};

/// An API token; only its hash is stored.
struct api_token_record {
  row_id id = 0;
  row_id user_id = 0;
  std::string name;
  std::string token_hash;
  std::int64_t created_at = 0;
  std::optional<std::int64_t> last_used_at;
  std::optional<std::int64_t> revoked_at;
  /// What the token may do: "admin", "user", or "agent" (chat with `agent_id` only).
  std::string scope = "user";
  /// For scope "agent": the one agent the token may chat with.
  std::optional<row_id> agent_id;
};

/// An LLM provider endpoint (openai, claude, openai-compatible, …).
struct provider_record {
  row_id id = 0;
  std::string name;
  std::string kind;
  std::string base_url;
  /// Where the key comes from (an environment variable name), never the key itself.
  std::string api_key_ref;
  std::string config_json = "{}";
  std::int64_t created_at = 0;
  /// A key given through the API, as stored: sealed by `secret_box` (`v1:…`; the API
  /// seals it before writing, and a start seals any plain text left by an older build).
  /// Opened only where a request needs it (`reveal_secret`); never returned by the API.
  /// Empty: none (use `api_key_ref`).
  std::string api_key;
};

/// An agent: its prompt, models, tools, limits and mid-run queue policy.
struct agent_record {
  row_id id = 0;
  std::string uuid;
  std::string name;
  std::string system_prompt;
  std::optional<row_id> provider_id;
  std::string main_model;
  /// Used for sub-agents and compression; empty: the main model.
  std::string fast_model;
  /// Used when the main model fails transiently; empty: none.
  std::string fallback_model;
  /// JSON array of tool names.
  std::string tools_json = "[]";
  /// JSON object of limits (max_rounds, max_tokens, …).
  std::string limits_json = "{}";
  /// followup | steer | interrupt | collect.
  std::string queue_policy = "followup";
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
};

/// A conversation between one user and one agent.
struct conversation_record {
  row_id id = 0;
  std::string uuid;
  row_id owner_user_id = 0;
  row_id agent_id = 0;
  std::string title;
  bool archived = false;
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
  /// Created by the OpenAI-compatible route for one request: deleted, with its workspace
  /// and files, once it has been idle for `api.ephemeral_retention_ms`.
  bool ephemeral = false;
};

/// One message of a conversation.
struct message_record {
  row_id id = 0;
  row_id conversation_id = 0;
  /// The conversation's owner; filled in on insert (any value given is ignored).
  row_id owner_user_id = 0;
  std::optional<row_id> run_id;
  /// system | user | assistant | tool.
  std::string role;
  std::string content;
  /// JSON array of the assistant's tool calls; empty when none.
  std::string tool_calls_json;
  /// For role "tool": the call this message answers.
  std::string tool_call_id;
  /// JSON of the tool's structured result; empty when none.
  std::string tool_results_json;
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  std::int64_t created_at = 0;
};

/// The stored messages a prompt message stands for: its own row (`first == last`), or, for
/// a context summary message, the range the summary covers (context_summaries.hpp). 0:
/// not stored (or not known).
struct stored_span {
  row_id first = 0;
  row_id last = 0;
};
/// A prompt message's span, shared between the actor that holds the message and the
/// writes that fill and read it: only the store writer's thread reads or writes the
/// value (a write fills it as it stores the message; a later write reads it). Null: not
/// stored.
using message_span = std::shared_ptr<stored_span>;

/// One agent run.
struct run_record {
  row_id id = 0;
  std::string uuid;
  row_id conversation_id = 0;
  row_id agent_id = 0;
  std::optional<row_id> parent_run_id;
  run_status status = run_status::queued;
  std::string model;
  std::string error;
  std::int64_t created_at = 0;
  std::optional<std::int64_t> started_at;
  std::optional<std::int64_t> finished_at;
};

/// One step of a run (LLM round, tool call, gate, recovery note, …), numbered in order.
struct execution_step_record {
  row_id id = 0;
  row_id run_id = 0;
  /// Assigned on insert: 1, 2, 3, … per run.
  std::int64_t seq = 0;
  std::string kind;
  std::string name;
  std::string input_json;
  std::string output_json;
  std::string status = "done";
  std::int64_t created_at = 0;
};

/// One persisted entry of a run's journal: the event an SSE client got, with its id.
struct run_event_record {
  /// The SSE id the entry had live: 1, 2, 3, … per run.
  std::int64_t seq = 0;
  /// The SSE event name; empty for the closing `[DONE]`.
  std::string event;
  /// The entry's data (JSON, or `[DONE]`).
  std::string data;
};

/// A journal entry to store, its text borrowed from the caller (the journal's own bytes).
struct run_event_view {
  std::int64_t seq = 0;
  std::string_view event;
  std::string_view data;
};

/// A run's plan.
struct plan_record {
  row_id id = 0;
  row_id run_id = 0;
  std::string goal;
  /// active | completed | failed | abandoned.
  std::string status = "active";
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
};

/// One item of a plan; at most one per plan is `running`.
struct plan_item_record {
  row_id id = 0;
  row_id plan_id = 0;
  std::int64_t position = 0;
  std::string title;
  /// pending | running | completed | blocked | failed | skipped.
  std::string status = "pending";
  std::string note;
  std::int64_t updated_at = 0;
};

/// An uploaded file or a produced artifact; the bytes live at `storage_path`.
struct file_record {
  row_id id = 0;
  std::string uuid;
  row_id owner_user_id = 0;
  std::optional<row_id> conversation_id;
  std::optional<row_id> run_id;
  /// upload | artifact.
  std::string kind;
  std::string name;
  std::string mime_type = "application/octet-stream";
  std::int64_t size_bytes = 0;
  std::string sha256;
  std::string storage_path;
  std::int64_t created_at = 0;
};

/// A retained fact about a user (AIClaw §5).
struct memory_item_record {
  row_id id = 0;
  std::string uuid;
  row_id user_id = 0;
  std::optional<row_id> agent_id;
  /// user | agent_user.
  std::string scope = "user";
  /// preference | profile | fact | decision | procedure | constraint.
  std::string kind = "fact";
  std::string memory_key;
  std::string content;
  std::string summary;
  std::int64_t importance = 50;
  double confidence = 0.8;
  /// normal | sensitive.
  std::string sensitivity = "normal";
  /// candidate | active | superseded | dismissed | deleted.
  std::string status = "candidate";
  bool pinned = false;
  std::optional<std::int64_t> expires_at;
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
  /// The item that replaced this one (schema 6; set once it is superseded).
  std::optional<row_id> superseded_by;
};

/// One change to a memory item.
struct memory_revision_record {
  row_id id = 0;
  row_id memory_id = 0;
  /// created | updated | approved | dismissed | forgotten | imported.
  std::string action;
  std::string content;
  std::string summary;
  std::string status;
  std::string actor;
  std::int64_t created_at = 0;
};

/// Where a memory came from or was used.
struct memory_evidence_record {
  row_id id = 0;
  row_id memory_id = 0;
  /// source | used.
  std::string relation;
  std::optional<row_id> conversation_id;
  std::optional<row_id> message_id;
  std::optional<row_id> run_id;
  std::string source;
  std::int64_t created_at = 0;
};

/// A configured tool.
struct tool_record {
  row_id id = 0;
  std::string name;
  /// builtin | http | script | mcp.
  std::string kind;
  std::string description;
  std::string schema_json = "{}";
  std::string config_json = "{}";
  bool enabled = true;
  std::int64_t created_at = 0;
  /// A custom tool's own approval mode (issue 19): never | agent_initiated | always; empty:
  /// none (the agent's settings decide).
  std::string approval;
};

/// A configured MCP server.
struct mcp_server_record {
  row_id id = 0;
  std::string name;
  /// stdio | http.
  std::string transport;
  /// Command line (stdio) or URL (http).
  std::string endpoint;
  std::string config_json = "{}";
  bool enabled = true;
  std::int64_t created_at = 0;
};

/// A configured web search engine; at most one is the default.
struct search_engine_record {
  row_id id = 0;
  std::string name;
  std::string kind;
  std::string base_url;
  std::string api_key_ref;
  std::string config_json = "{}";
  bool enabled = true;
  bool is_default = false;
  std::int64_t created_at = 0;
};

} // namespace troupe::storage
