// The store and health facades over their actors (the chat facade is in chat_facade.cpp).

#include "troupe/actors/service_facades.hpp"

#include "troupe/actors/bridge.hpp"

namespace troupe::actors {

store_writer_facade::store_writer_facade(caf::actor_system& system, store_writer_actor writer,
                                         std::shared_ptr<write_backlog> backlog)
    : system_(system), writer_(std::move(writer)), backlog_(std::move(backlog)) {}

store_writer_actor store_writer_facade::writer() const {
  std::lock_guard lock(mutex_);
  return writer_;
}

boost::asio::awaitable<expected<std::int64_t>> store_writer_facade::write(storage::write_op op) {
  auto to = writer();
  if (!to) {
    co_return fail(errc::unavailable, "the store writer has stopped");
  }
  // Awaited as a named value: GCC 12 destroys some temporaries of a co_await
  // full-expression twice.
  // Refused before it is sent: the caller has acknowledged nothing yet.
  auto backlog = backlog_;
  if (backlog && !backlog->try_admit()) {
    co_return tl::unexpected(backlog->overloaded());
  }
  auto pending = actors::write(system_, std::move(to), std::move(op), store_write_timeout);
  auto done = co_await std::move(pending);
  if (backlog) {
    backlog->done();
  }
  co_return done;
}

void store_writer_facade::close() {
  std::lock_guard lock(mutex_);
  writer_ = nullptr;
}

health_actor_facade::health_actor_facade(caf::actor_system& system, health_actor health)
    : system_(system), health_(std::move(health)) {}

health_actor health_actor_facade::actor() const {
  std::lock_guard lock(mutex_);
  return health_;
}

boost::asio::awaitable<expected<std::uint64_t>>
health_actor_facade::ping(std::chrono::milliseconds deadline) {
  auto asking = ask<std::uint64_t>(system_, actor(), deadline, ping_atom::value);
  co_return co_await std::move(asking);
}

void health_actor_facade::close() {
  std::lock_guard lock(mutex_);
  health_ = nullptr;
}

} // namespace troupe::actors
