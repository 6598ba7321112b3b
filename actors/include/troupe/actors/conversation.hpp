#pragma once

/// \file
/// The conversation actor and the registry that finds it.
///
/// A conversation runs one agent run at a time. A message that arrives while a run is in
/// flight is handled under the agent's queue policy and is never dropped silently:
///   followup  - queued; runs after the current run, in arrival order;
///   collect   - queued messages are merged into one run after the current one;
///   steer     - added to the current run's next LLM round (answered with its result);
///   interrupt - the current run is cancelled and the message runs next.
/// Subscribers receive every event of every run. After `idle_ttl` without activity the
/// actor passivates (quits): its state is in SQLite, the registry spawns it again.
///
/// Its interface is `conversation_actor` below.
///
/// When the spec names a files directory, the files a run produced are copied there and
/// stored as `files` rows (kind "artifact", linked to the run and conversation) before
/// the run's result is delivered; the result's artifacts then carry their file ids.
///
/// The registry is sharded by conversation id; each shard (`conversation_shard_actor`)
/// serializes creation in its mailbox, so concurrent first messages for one id get the
/// same actor.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/all.hpp>

#include "troupe/actors/prompt_context.hpp"
#include "troupe/actors/run.hpp"

namespace troupe::actors {

using send_atom = caf::atom_constant<caf::atom("send")>;
using subscribe_atom = caf::atom_constant<caf::atom("subscribe")>;
using get_atom = caf::atom_constant<caf::atom("get")>;
using done_atom = caf::atom_constant<caf::atom("done")>;
/// What the next prompt would carry (GET …/context).
using context_atom = caf::atom_constant<caf::atom("context")>;
/// The registry's live conversation of an id, never spawning one.
using peek_atom = caf::atom_constant<caf::atom("peek")>;
/// The conversation's own timer: no activity since the given generation.
using idle_atom = caf::atom_constant<caf::atom("idle")>;
/// The conversation's own timer: the guard of the run of the given turn.
using guard_atom = caf::atom_constant<caf::atom("guard")>;

/// The default of `actors.max_pending`.
inline constexpr std::size_t default_max_pending = 64;

/// What a conversation needs to start runs.
struct conversation_spec {
  /// Public conversation id.
  std::string id;
  /// The conversation's row and owner's agent row; 0: runs are not persisted (unless
  /// `unstored` is set).
  storage::row_id conversation_row = 0;
  /// A conversation created for its first message and not written yet: its row (with
  /// `unstored_history` as its first messages) is inserted in the same commit as that
  /// message and its run, so a new conversation costs one commit, not two.
  std::optional<storage::conversation_record> unstored;
  std::vector<chat_message> unstored_history;
  storage::row_id agent_row = 0;
  agent_settings agent;
  net::provider_config provider;
  std::filesystem::path workspace;
  std::chrono::milliseconds tool_timeout = default_tool_timeout;
  run_io io;
  /// Messages kept in memory for the next run's prompt.
  std::size_t history_limit = 100;
  /// Earlier messages, oldest first (loaded from SQLite when the actor starts).
  std::vector<chat_message> history;
  /// Parallel to `history` (may be shorter: the rest unknown): the stored rows each
  /// message stands for (a summary message: the range it covers).
  std::vector<storage::stored_span> history_spans;
  /// The owner, and where artifacts are stored (`<data-dir>/files`); 0 or empty: the
  /// run's files stay in the workspace only.
  storage::row_id owner_user = 0;
  std::filesystem::path files_dir;
  std::chrono::milliseconds idle_ttl{std::chrono::minutes(10)};
  /// Messages that may wait for a run at once (`actors.max_pending`): queued behind the
  /// active run, merged into a queued turn or handed to the active run to steer it. One
  /// more is refused, before it is stored or acknowledged, with `errc::limit_exceeded`
  /// naming the limit. 0: no bound. Recovered turns are never refused.
  std::size_t max_pending = default_max_pending;
};

/// A message for the conversation with the id its run will have and who follows it.
/// Who follows one turn: its run's events, then (done_atom, run_result) at its end.
using turn_observer =
    caf::typed_actor<caf::reacts_to<event_atom, run_event>, caf::reacts_to<done_atom, run_result>>;

struct turn_request {
  std::string text;
  /// The id of the run that handles it (the run row's uuid); empty: generated. Under
  /// the `collect` policy a message merged into a queued turn runs under that turn's id.
  std::string run_id;
  /// Receives the run's events and its final (done_atom, run_result); may be invalid.
  turn_observer observer;
  /// Set for a run recovered at start: its row and message are stored already, and it
  /// runs as a follow-up whatever the agent's queue policy.
  storage::row_id run_row = 0;
  /// The policy for this message when a run is active; unset: the agent's (a channel
  /// sets its own `queue_policy`).
  std::optional<queue_policy> policy;
  /// Whose memory its run uses when not the conversation's owner (a channel sender in a
  /// shared thread); 0: the owner's.
  storage::row_id memory_user = 0;
  /// A run that waited for a human's approval when the node stopped (with `run_row`): it
  /// resumes from its paused round (issue 19).
  std::shared_ptr<const run_resume> resume;
};

/// The conversation's interface.
///   (send_atom, text) -> run_result          the result of the run that handled it
///   (send_atom, turn_request) -> bool        accepted at once; the turn's observer gets
///                                            its run's events and, at the end,
///                                            (done_atom, run_result)
///   Either send is refused (an error that `from_caf_error` reads as
///   `errc::limit_exceeded`) while `max_pending` messages already wait.
///   (cancel_atom, run_id) -> bool            cancels that run (active or queued); false
///                                            when it is not here
///   (subscribe_atom, run_event_sink)         every event of every run, from now on
///   (context_atom) -> prompt_context_view    what its next prompt would carry
/// From its runs, and sent by the conversation to itself (not for others):
///   (event_atom, run_event)                  an event of the active run, forwarded
///   (idle_atom, generation)                  passivates when nothing happened since
///   (guard_atom, turn)                       the limit of that turn's run passed (moved
///                                            by the time the run waited for a human)
///   (io_done_atom, io_completion)            work it started on the blocking pool is done
using conversation_actor =
    caf::typed_actor<caf::replies_to<send_atom, std::string>::with<run_result>,
                     caf::replies_to<send_atom, turn_request>::with<bool>,
                     caf::replies_to<cancel_atom, std::string>::with<bool>,
                     caf::reacts_to<subscribe_atom, run_event_sink>,
                     caf::replies_to<context_atom>::with<prompt_context_view>,
                     caf::reacts_to<event_atom, run_event>,
                     caf::reacts_to<idle_atom, std::uint64_t>,
                     caf::reacts_to<guard_atom, std::uint64_t>, io_completion_handler>;

conversation_actor spawn_conversation(caf::actor_system& system, conversation_spec spec);

/// What the next prompt of a conversation with `spec` and `history` would carry besides
/// the next message (conversation_history.cpp): the tool definitions are resolved for
/// the agent as a run resolves them. `source` names where the history came from.
prompt_context_view prompt_context_of(const conversation_spec& spec,
                                      const std::vector<chat_message>& history, std::string source);

/// How a registry shard makes the conversation actor of an id that is not live.
struct conversation_factory {
  /// A conversation whose spec is at hand (one created with its first message, see
  /// `chat_submission::fresh`): spawned at once; an invalid handle when there is none.
  std::function<conversation_actor(caf::actor_system&, const std::string&)> take_prepared;
  /// Reads a passivated conversation's spec (its rows and history). Its reads must not
  /// run on the calling thread (a shard's): the chat service runs them on the blocking
  /// pool. Awaited on `executor()`.
  std::function<boost::asio::awaitable<expected<conversation_spec>>(std::string)> load;
  /// Where `load` is awaited: an io executor of the calling thread's shard.
  std::function<boost::asio::any_io_executor()> executor;
};

/// A registry shard: (get_atom, id) -> the conversation (invalid: it cannot be made);
/// (peek_atom, id) -> the conversation when it is live (invalid: it is not). A
/// passivated conversation is loaded while the shard goes on serving other ids; the
/// requests for an id that is loading all get the one actor made from the load.
using conversation_shard_actor =
    caf::typed_actor<caf::replies_to<get_atom, std::string>::with<conversation_actor>,
                     caf::replies_to<peek_atom, std::string>::with<conversation_actor>,
                     io_completion_handler>;

/// Routes conversation ids to registry shards.
class conversation_registry {
public:
  conversation_registry(caf::actor_system& system, conversation_factory factory,
                        std::size_t shards = 8);

  /// The shard that owns `id`; ask it (get_atom, id) for the conversation actor. On the
  /// shard scheduler, `shards` is ignored: there is one registry shard per scheduler
  /// shard, homed there, and `id` maps to the one on the shard its conversation lives on.
  const conversation_shard_actor& shard_for(std::string_view id) const;
  std::size_t shard_count() const noexcept {
    return shards_.size();
  }

  /// Shutdown: every shard exits and takes its live conversations with it; each
  /// conversation cancels its active run.
  void stop();

private:
  std::vector<conversation_shard_actor> shards_;
  /// With the shard scheduler: its shards (there is one registry shard per shard).
  shard_set* scheduler_shards_ = nullptr;
};

} // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::turn_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::prompt_context_view)
