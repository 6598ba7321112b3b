#pragma once

/// \file
/// The chat service: how the HTTP layer starts agent runs. It owns the conversation
/// registry (one conversation actor per conversation id, built from its SQLite rows on
/// first use, with its history) and the directory of run journals. `submit` hands a
/// message to its conversation and returns at once with the run's id and journal; the
/// run then goes on whether or not anyone follows it.

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <caf/fwd.hpp>

#include "troupe/actors/chat_facade.hpp"
#include "troupe/actors/conversation.hpp"
#include "troupe/actors/run_journal.hpp"
#include "troupe/actors/store_writer.hpp"
#include "troupe/runtime/agent_config.hpp"
#include "troupe/storage/catalog_cache.hpp"
#include "troupe/storage/database.hpp"
#include "troupe/storage/records.hpp"
#include "troupe/storage/secret_box.hpp"

namespace troupe::actors {

struct chat_service_options {
  store_writer_actor writer;
  std::shared_ptr<storage::read_pool> reads;
  /// Agents and providers for loading conversations; null: read from `reads`.
  std::shared_ptr<storage::catalog_cache> catalog;
  /// What runs use for I/O (its `writer` is set from `writer`).
  run_io io;
  /// Providers declared in the config: their inline keys never reach the database, so
  /// runs take them from here.
  std::vector<provider_settings> declared_providers;
  /// Opens provider keys stored sealed; null: keys are as stored (tests without one).
  std::shared_ptr<const storage::secret_box> secrets;
  /// Which variables a provider's key reference may name (`[secrets] allowed_env`).
  key_env_policy key_env;
  std::filesystem::path data_dir;
  std::chrono::milliseconds idle_ttl{std::chrono::minutes(10)};
  std::size_t history_messages = 100;
  /// Messages a conversation lets wait for a run (`actors.max_pending`); 0: no bound.
  std::size_t max_pending = default_max_pending;
  /// Estimated tokens of earlier turns a round's prompt carries
  /// (`actors.history_max_tokens`); 0: only the context window bounds them.
  std::uint32_t history_max_tokens = 0;
  /// When a run compresses its prompt (`[compression]`).
  compression_settings compression;
  std::chrono::milliseconds tool_timeout = default_tool_timeout;
  std::chrono::milliseconds retention{std::chrono::minutes(15)};
  /// Finished runs kept for replay at most, whatever the retention (oldest go first).
  std::size_t max_retained_runs = 10'000;
  /// Bytes all journals' entries may hold (`api.journal_max_bytes`); past it the oldest
  /// finished journals leave memory (their replay then comes from storage).
  std::size_t journal_max_bytes = run_directory::default_max_bytes;
  std::size_t registry_shards = 8;
  /// The runs' series of /metrics; null: not counted.
  std::shared_ptr<run_metrics> metrics;
};

/// What `submit` started.
struct submitted_run {
  std::string run_id;
  std::string conversation_id;
  run_journal_actor journal;
  /// The conversation actor that took the message (cancel the run there).
  conversation_actor conversation;
};

/// An agent row turned into the settings a run uses (tools and limits parsed).
expected<agent_settings> agent_from_record(const storage::agent_record& a,
                                           const std::string& provider_name);

/// The tokens a conversation's earlier turns may take when it is loaded (issue 16): the
/// agent's context window (a prompt never holds more), cut to `history_max_tokens` when
/// that is set (`actors.history_max_tokens`).
std::size_t load_budget(const agent_settings& agent);

class chat_service {
public:
  chat_service(caf::actor_system& system, chat_service_options options);
  ~chat_service();
  chat_service(const chat_service&) = delete;
  chat_service& operator=(const chat_service&) = delete;

  /// Hands the message to its conversation. Fails when the conversation cannot be
  /// loaded (its agent or provider is gone or invalid), and with `errc::limit_exceeded`
  /// when it already has `max_pending` messages waiting (nothing is stored then).
  boost::asio::awaitable<expected<submitted_run>> submit(chat_submission submission);

  /// A new conversation id homed on the calling thread's shard (any id off the shards).
  std::string new_conversation_id() const;

  /// Start-up recovery: hands every run that was accepted but had not started when the
  /// process stopped back to its conversation, oldest first (a run that cannot be handed
  /// back is marked failed, saying why). Returns how many were resumed.
  /// Runs waiting for a human's approval when the process stopped (issue 19) go first:
  /// each goes on with its paused round (paused_runs.cpp).
  boost::asio::awaitable<std::size_t> resume_queued_runs();
  /// Start-up recovery of the runs storage recovery left waiting for a human's approval:
  /// each is handed back to its conversation and resumes its paused round (one that
  /// cannot be is marked failed and its approvals expired). Returns how many resumed.
  boost::asio::awaitable<std::size_t> resume_paused_runs();

  /// The journal of a run started since this node began (or retained), with its owner.
  std::optional<run_directory::entry> find_run(const std::string& run_id) const;

  /// A run's entries after `after_seq` from storage (stored_journal.hpp), read on the
  /// calling thread through the read pool.
  expected<std::vector<journal_entry>> stored_entries(const std::string& run_id,
                                                      std::uint64_t after_seq) const;

  /// The directory of live journals (its byte count and cap).
  const run_directory& directory() const noexcept {
    return *directory_;
  }

  /// Cancels a run (active or queued). False when its conversation does not have it.
  boost::asio::awaitable<expected<bool>> cancel(const std::string& conversation_id,
                                                const std::string& run_id);

  /// What the conversation's next prompt would carry (chat_facade::context): asked of
  /// the live conversation, never spawning one; else rebuilt from the database as the
  /// conversation would load (on the blocking pool).
  boost::asio::awaitable<expected<prompt_context_view>> context(std::string conversation_id);

  /// Ends every conversation (each cancels its active run). Call before the actor
  /// system goes down.
  void stop();

  caf::actor_system& system() noexcept {
    return system_;
  }

private:
  /// Whose memory a run resumed at start uses: the sender of the channel message that
  /// started it (a thread the senders share), else 0 (the owner's).
  static storage::row_id resumed_memory_user(storage::read_pool& reads,
                                             const std::string& run_uuid);
  /// The spec prepared for `id` by its first message (`chat_submission::fresh`), spawned;
  /// an invalid handle when there is none (the registry then loads it from storage).
  conversation_actor take_prepared(caf::actor_system& system, const std::string& id);

  /// Specs of conversations created with their first message, taken by the registry's
  /// factory instead of reading the rows back (see `chat_submission::fresh`).
  void forget_prepared(const std::string& conversation_id);
  std::mutex prepared_mutex_;
  std::unordered_map<std::string, conversation_spec> prepared_;

  caf::actor_system& system_;
  chat_service_options options_;
  /// A copy of `options_` that loads own (they may outlive their awaiter).
  std::shared_ptr<const chat_service_options> shared_options_;
  std::shared_ptr<run_directory> directory_;
  std::unique_ptr<conversation_registry> registry_;
};

} // namespace troupe::actors
