#pragma once

/// \file
/// The facades actors/ exposes to the HTTP layer (chat_facade.hpp, store_facade.hpp,
/// health_facade.hpp), implemented over the actors. Only the node's wiring (and tests)
/// see these: each holds actor handles, and `close` drops them, so that the actor system
/// can go down while routes (which hold the facades) still exist.

#include <memory>
#include <mutex>

#include <caf/fwd.hpp>

#include "troupe/actors/chat_facade.hpp"
#include "troupe/actors/chat_service.hpp"
#include "troupe/actors/health.hpp"
#include "troupe/actors/health_facade.hpp"
#include "troupe/actors/store_facade.hpp"
#include "troupe/actors/store_writer.hpp"

namespace troupe::actors {

/// Writes through the store_writer with `store_write_timeout`.
class store_writer_facade final : public store_facade {
public:
  /// Every write counts in `backlog` (null: no bound) and is refused as overloaded past it.
  store_writer_facade(caf::actor_system& system, store_writer_actor writer,
                      std::shared_ptr<write_backlog> backlog = nullptr);
  boost::asio::awaitable<expected<std::int64_t>> write(storage::write_op op) override;
  /// Drops the writer handle; later writes fail as unavailable.
  void close();

private:
  store_writer_actor writer() const;
  caf::actor_system& system_;
  mutable std::mutex mutex_;
  store_writer_actor writer_;
  std::shared_ptr<write_backlog> backlog_;
};

/// Pings the health actor.
class health_actor_facade final : public health_facade {
public:
  health_actor_facade(caf::actor_system& system, health_actor health);
  boost::asio::awaitable<expected<std::uint64_t>> ping(std::chrono::milliseconds deadline) override;
  /// Drops the actor handle; later pings fail as unavailable.
  void close();

private:
  health_actor actor() const;
  caf::actor_system& system_;
  mutable std::mutex mutex_;
  health_actor health_;
};

/// Runs chats through the chat service; follows journals with a stream sink actor.
class chat_service_facade final : public chat_facade {
public:
  explicit chat_service_facade(std::shared_ptr<chat_service> service);
  boost::asio::awaitable<expected<run_ticket>> submit(chat_submission submission) override;
  boost::asio::awaitable<expected<run_result>> wait(run_ticket run,
                                                    std::chrono::milliseconds timeout) override;
  boost::asio::awaitable<expected<run_status_view>>
  status(run_ticket run, std::chrono::milliseconds timeout) override;
  void follow(run_ticket run, std::uint64_t after_seq, net::response_stream stream,
              entry_translator translate, bool cancel_on_leave) override;
  void observe(run_ticket run, std::uint64_t after_seq, entry_observer on_entry) override;
  boost::asio::awaitable<expected<bool>> cancel(std::string conversation_id,
                                                std::string run_id) override;
  std::optional<found_live_run> find_run(const std::string& run_id) const override;
  boost::asio::awaitable<expected<prompt_context_view>>
  context(std::string conversation_id) override;
  std::chrono::milliseconds run_timeout(const storage::agent_record& agent) const override;
  std::string new_conversation_id() const override;
  /// Drops the chat service; later calls fail as unavailable.
  void close();

private:
  std::shared_ptr<chat_service> service() const;
  mutable std::mutex mutex_;
  std::shared_ptr<chat_service> service_;
};

} // namespace troupe::actors
