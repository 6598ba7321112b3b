#pragma once

/// \file
/// The run actor: the supervisor of one agent run. It owns the task contract, the
/// evidence ledger, the plan, the correction budget and the deadline; drives LLM rounds
/// through the provider client and tool rounds through the tools, both as coroutines on
/// the http client's io executor (started through the bridge); publishes the run's
/// events to a subscriber; persists messages, steps and the run status through the
/// store_writer; and answers the actor that started it with the run's result.
///
/// Its interface is `run_actor` below; the subscriber is a `run_event_sink`.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "troupe/actors/bridge.hpp"
#include "troupe/actors/memory_service.hpp"
#include "troupe/actors/run_result.hpp"
#include "troupe/actors/shard_scheduler.hpp"
#include "troupe/actors/store_writer.hpp"
#include "troupe/net/http_client.hpp"
#include "troupe/net/provider_client.hpp"
#include "troupe/runtime/agent_config.hpp"
#include "troupe/runtime/chat.hpp"
#include "troupe/runtime/harness/evidence_ledger.hpp"
#include "troupe/runtime/run_event.hpp"
#include "troupe/storage/approvals.hpp"
#include "troupe/storage/records.hpp"
#include "troupe/tools/sandbox.hpp"
#include "troupe/tools/tool.hpp"
#include "troupe/tools/tool_resolver.hpp"

namespace troupe::tools {
class blocking_pool;
} // namespace troupe::tools

namespace troupe::actors {

class approval_registry;

using run_atom = caf::atom_constant<caf::atom("run")>;
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;
using event_atom = caf::atom_constant<caf::atom("event")>;
using steer_atom = caf::atom_constant<caf::atom("steer")>;
/// The run's own messages: its deadline, and a batch of streamed text from its LLM call.
using deadline_atom = caf::atom_constant<caf::atom("deadline")>;
using delta_atom = caf::atom_constant<caf::atom("delta")>;
/// The run's row is written (its id), or could not be (0).
using row_atom = caf::atom_constant<caf::atom("row")>;
/// A human's decision on a tool call that waits (issue 19), and the approval's deadline.
using approval_atom = caf::atom_constant<caf::atom("approval")>;
using approval_expire_atom = caf::atom_constant<caf::atom("apr_expire")>;
/// The node stops: a run that waits for a human leaves its rows as they are (to be
/// resumed at the next start); any other run is cancelled.
using shutdown_atom = caf::atom_constant<caf::atom("shutdown")>;

/// The default per-tool timeout.
inline constexpr std::chrono::milliseconds default_tool_timeout{std::chrono::minutes(5)};

/// Deepest sub-agent nesting: a run at this depth may not start sub-agents.
inline constexpr int max_run_depth = 3;

/// What a run uses for I/O. Everything here outlives the run.
struct run_io {
  /// LLM rounds and tool calls run on this client's executor.
  net::http_client* http = nullptr;
  /// With the shard scheduler: one client per shard (index: the shard), each on its
  /// shard's executor. Whoever builds a run's `run_io` on a shard thread sets `http` to
  /// `http_here()`, so the run's transfers and tool calls stay on its shard.
  std::shared_ptr<const std::vector<net::http_client*>> shard_http;
  /// The client of the calling thread's shard; off a shard (or without per-shard
  /// clients), `http`.
  net::http_client* http_here() const noexcept {
    if (shard_http) {
      if (const auto here = shard_set::current(); here && *here < shard_http->size()) {
        return (*shard_http)[*here];
      }
    }
    return http;
  }
  /// Where a run finds its tools: one snapshot per run, resolved for its agent.
  std::shared_ptr<const tools::tool_resolver> resolver;
  /// Without a resolver: these tools and the control tools, as one source (tests and
  /// benches build their own registries).
  std::shared_ptr<const tools::tool_registry> tools;
  /// Null: tools that need a sandbox fail closed.
  std::shared_ptr<const tools::sandbox_runner> sandbox;
  /// The cap on a workspace's bytes given to every tool call (`tools.workspace_max_bytes`;
  /// 0: none).
  std::uint64_t workspace_max_bytes = 0;
  /// Unset: nothing is persisted.
  std::optional<store_writer_actor> writer;
  /// The writer's back-pressure: a conversation counts the write of each message it
  /// takes here and refuses the message past the bound. Null: no bound.
  std::shared_ptr<write_backlog> writer_backlog;
  /// Durable memory (issue 15): recalled into each top-level run's prompt when the agent
  /// has `memory` on and the run has an owner. Null: no memory.
  std::shared_ptr<memory_service> memory;
  /// Where blocking work of a run and its conversation goes (copying artifacts into the
  /// files directory). Null: that work runs on the calling thread (tests only).
  std::shared_ptr<tools::blocking_pool> blocking;
  /// Live approvals (issue 19): a run registers the tool calls that wait for a human
  /// here. Null: a call that needs approval is refused (policy_blocked).
  std::shared_ptr<approval_registry> approvals;
  /// How long an approval waits before it is denied, unless the agent says
  /// (`tools.approval_timeout_s`).
  std::chrono::seconds approval_timeout{600};
};

/// What a run resumed after a restart starts from (issue 19): it had paused on a human's
/// approval. Read from its rows by the chat service at start.
struct run_resume {
  /// The stored row of its objective (its first user message).
  storage::stored_span objective_span;
  /// Its own messages after the objective (assistant rounds with their tool calls, tool
  /// results), as stored, and their rows.
  std::vector<chat_message> messages;
  std::vector<storage::stored_span> spans;
  /// The tool calls of the rounds before the paused one (its `tool` steps), for the
  /// evidence ledger.
  std::vector<harness::tool_event> earlier_events;
  /// The paused round as the run last saved it (approval_record::round_json), and the
  /// seq of the run's last event then (its events go on from there).
  std::string round_json;
  std::uint64_t seq = 0;
  /// Every approval of the run (the paused round's pending ones among them).
  std::vector<storage::approval_record> approvals;
};

/// Everything one run needs.
struct run_spec {
  /// Public ids for events.
  std::string run_id;
  std::string turn_id;
  /// Database rows; 0: not persisted (the run row is created by the caller, queued).
  storage::row_id run_row = 0;
  /// The run row is being written while the run starts: its writes wait for
  /// (row_atom, row, conversation row) and go then, in order; row 0 (the write failed)
  /// fails the run. A conversation created with this run learns its row then too.
  bool row_pending = false;
  /// The run row was written as running (its start is stored): the run does not say so
  /// again.
  bool row_inserted_running = false;
  storage::row_id conversation_row = 0;
  /// The conversation's owner and the agent's row (memory's scope); 0: unknown.
  storage::row_id owner_user = 0;
  /// Whose memory the run recalls and its memory tools read and write, when not the
  /// conversation's owner (a channel thread shared by several senders: the sender of the
  /// message); 0: `owner_user`.
  storage::row_id memory_user = 0;
  /// The user whose memory this run uses.
  storage::row_id memory_owner() const noexcept {
    return memory_user != 0 ? memory_user : owner_user;
  }
  storage::row_id agent_row = 0;
  agent_settings agent;
  /// The agent's provider, resolved (base URL, key, deadlines, retry policy).
  net::provider_config provider;
  /// Earlier messages of the conversation (without a system message).
  std::vector<chat_message> history;
  /// Parallel to `history` (may be shorter: the rest unknown): the stored rows each
  /// message stands for, which a compression summary records as its range.
  std::vector<storage::message_span> history_spans;
  /// The user's message for this run.
  std::string objective;
  /// The stored row of the objective when the caller stored it (`persist_user_message`
  /// false), filled by that write.
  storage::message_span objective_span;
  /// 0 for a top-level run; sub-agents are parent depth + 1.
  int depth = 0;
  /// Tools the caller forbids for this run (sub-agent mode and depth limits).
  std::vector<std::string> blocked_tools;
  /// Use the agent's fast model (sub-agent tasks with model "fast").
  bool use_fast_model = false;
  /// `/compact` (issue 16): compress the history now, whatever its size, and answer with
  /// the summary's size; no LLM round runs.
  bool compact_only = false;
  /// Persist the objective as a user message (false when the caller already has).
  bool persist_user_message = true;
  std::filesystem::path workspace;
  std::chrono::milliseconds tool_timeout = default_tool_timeout;
  run_io io;
  /// A sub-agent's: its parent's tool snapshot. Unset: resolved when the run starts.
  std::shared_ptr<const tools::tool_snapshot> tool_snapshot;
  /// Set for a run resumed after a restart: it goes on with its paused round instead of
  /// asking the model first.
  std::shared_ptr<const run_resume> resume;
};

/// Whoever follows a run: receives (event_atom, run_event) for every event, in order.
using run_event_sink = caf::typed_actor<caf::reacts_to<event_atom, run_event>>;

/// The run's interface.
///   (run_atom)    -> run_result   starts the run; the answer arrives when it ends
///   (cancel_atom)                 cancels every in-flight LLM stream and tool call
///                                 (sandboxed processes are killed); ends as cancelled
///   (shutdown_atom)               the node stops: a run waiting for a human quits and
///                                 leaves its rows to be resumed; any other is cancelled
///   (steer_atom, text)            adds a user message to the next LLM round
///   (row_atom, row, conversation) the run row of a run started with `row_pending` is
///                                 written (row 0: it could not be; the run fails), and
///                                 the conversation's row (written with it when new)
/// Sent by the run to itself (not for others):
///   (deadline_atom)               the run's deadline (`agent.timeout`) passed
///   (delta_atom, round, text)     streamed text of an LLM round, from its coroutine
///   (io_done_atom, io_completion) a coroutine started through the bridge finished
using run_actor =
    caf::typed_actor<caf::replies_to<run_atom>::with<run_result>, caf::reacts_to<cancel_atom>,
                     caf::reacts_to<shutdown_atom>, caf::reacts_to<steer_atom, std::string>,
                     caf::reacts_to<row_atom, storage::row_id, storage::row_id>,
                     caf::reacts_to<deadline_atom>, caf::reacts_to<delta_atom, int, std::string>,
                     caf::reacts_to<approval_atom, std::string, bool, std::string, std::int64_t>,
                     caf::reacts_to<approval_expire_atom, std::string>, io_completion_handler>;

/// What tool definitions cost of a prompt (the estimate a run makes once it starts).
std::size_t tool_definition_tokens(const std::vector<tool_definition>& tools);
/// The tool definitions a run of `spec` would offer the model (resolved as the run
/// resolves them: its agent's tools less the blocked ones).
expected<std::vector<tool_definition>> offered_tool_definitions(const run_spec& spec);

/// Spawns a run actor; it starts when it receives `run_atom`. `subscriber` (may be
/// invalid) receives its events.
run_actor spawn_run(caf::actor_system& system, run_spec spec, run_event_sink subscriber);

} // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::run_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::run_event)
