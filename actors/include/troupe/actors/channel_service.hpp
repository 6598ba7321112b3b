#pragma once

/// \file
/// The channel service: the channel facade over channel_thread actors. It finds a
/// channel by name (its row, its secret, its adapter; cached until `forget`), verifies
/// and decodes inbound requests with the adapter, journals every message (the journal's
/// unique (channel, platform message id) row, and its (channel, delivery id), are the
/// dedupe, across restarts too) and answers the platform as soon as the journal commit
/// is durable, at most 2 s later (else 503: the platform delivers again). Each new
/// message is then pushed into the mailbox of the actor of its (channel, thread key),
/// spawned on first use and forgotten when it passivates; the push is not awaited, and
/// it cannot be lost (see thread_registry). At start, `recover` hands back what a stop
/// left: journaled messages not answered yet, outbox parts not sent yet and final edits
/// not made yet; a thread that fails has the same done for its key at once.

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/fwd.hpp>

#include "troupe/actors/channel_facade.hpp"
#include "troupe/actors/channel_thread.hpp"
#include "troupe/runtime/channel_config.hpp"
#include "troupe/storage/secret_box.hpp"

namespace troupe::actors {

struct channel_service_options {
  store_writer_actor writer;
  std::shared_ptr<storage::read_pool> reads;
  /// Where threads read what they load when they wake (null: on their shard).
  std::shared_ptr<tools::blocking_pool> blocking;
  std::shared_ptr<storage::catalog_cache> catalog;
  std::shared_ptr<chat_facade> chat;
  /// Where `/approve ID` and `/deny ID` hand their decision (issue 19); null: the
  /// commands answer that approvals are decided over the API.
  std::shared_ptr<approvals_facade> approvals;
  /// Opens tokens stored sealed (channels created over the API); null: none can be.
  std::shared_ptr<const storage::secret_box> secrets;
  /// Channels declared in the config: their inline tokens never reach the database.
  std::vector<channel_settings> declared;
  /// Where `token_env` and friends are read, under `key_env`.
  std::map<std::string, std::string> environment;
  key_env_policy key_env;
  net::http_client* http = nullptr;
  std::shared_ptr<const std::vector<net::http_client*>> shard_http;
  outbox_policy outbox;
  std::chrono::milliseconds thread_idle{std::chrono::minutes(10)};
  /// The longest a thread shows the platform's typing indicator for one stretch of runs
  /// (`actors.channel_typing_cap_ms`).
  std::chrono::milliseconds typing_cap{std::chrono::minutes(2)};
  /// Beyond an agent's deadline, how long a thread waits for a run's answer
  /// (`actors.channel_run_grace_ms`).
  std::chrono::milliseconds run_grace{std::chrono::minutes(1)};
};

class channel_service final : public channel_facade {
public:
  channel_service(caf::actor_system& system, channel_service_options options);
  ~channel_service() override;
  channel_service(const channel_service&) = delete;
  channel_service& operator=(const channel_service&) = delete;

  boost::asio::awaitable<net::http_response> receive(std::string name,
                                                     net::http_request request) override;
  boost::asio::awaitable<net::http_response> handshake(std::string name,
                                                       net::http_request request) override;
  void forget(const std::string& name) override;

  /// Start-up recovery (after the chat service resumed its queued runs): parts left
  /// `sending` go back to `pending` (the platform may have them: see docs/channels.md),
  /// every pending part goes to its thread, and every journaled message not answered yet
  /// goes to its thread (one whose run was accepted waits for that run). Returns how many
  /// messages and parts were handed back.
  boost::asio::awaitable<std::size_t> recover();

  /// Hands back what a thread of (channel, thread key) held when it failed: its messages
  /// not answered and its parts not sent (as `recover`, for that thread only).
  boost::asio::awaitable<std::size_t> recover_thread(storage::row_id channel,
                                                     std::string thread_key);

  /// Ends every thread actor, each once it has recorded the send it has in flight (all
  /// at once, for at most a send's deadline and a few seconds); later requests are
  /// answered 503.
  void stop();

  /// The live thread actors by (channel id, thread key); shared with the actors, which
  /// leave it when they passivate.
  struct thread_registry;

private:
  /// The store writer, until `stop`.
  store_writer_actor writer() const;
  expected<std::shared_ptr<const live_channel>> channel(const std::string& name);
  expected<std::shared_ptr<const live_channel>> channel_by_id(storage::row_id id);
  expected<std::shared_ptr<const live_channel>> make_live(storage::channel_record record);
  /// The adapter of a WeCom, WeChat or WhatsApp channel (`callback_token`: the resolved
  /// `token` / `token_env`); unavailable, naming the variable, when a secret is missing.
  expected<std::shared_ptr<net::channel::channel_adapter>>
  make_platform_adapter(const storage::channel_record& record,
                        const std::string& callback_token) const;
  /// Journals `messages` in one commit (each once: a redelivery finds its row) and, from
  /// the commit's answer, hands each new one to its thread; an error when the commit
  /// failed or did not come within `deadline` (the platform delivers it again; a commit
  /// that comes later is handed over all the same).
  boost::asio::awaitable<expected<void>>
  journal(std::shared_ptr<const live_channel> channel,
          std::vector<net::channel::inbound_message> messages, std::chrono::milliseconds deadline);
  /// Makes channel `name` live (its adapter started) unless it is gone or disabled.
  void activate(const std::string& name);
  /// `recover`'s work, for every thread or for one (channel, thread key).
  boost::asio::awaitable<std::size_t>
  recover_where(std::optional<std::pair<storage::row_id, std::string>> only);

  caf::actor_system& system_;
  channel_service_options options_;
  std::shared_ptr<thread_registry> registry_;
  std::mutex channels_mutex_;
  std::map<std::string, std::shared_ptr<const live_channel>, std::less<>> channels_;
};

} // namespace troupe::actors
