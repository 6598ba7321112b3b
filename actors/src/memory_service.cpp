#include "troupe/actors/memory_service.hpp"

#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "troupe/actors/bridge.hpp"
#include "troupe/actors/shard_scheduler.hpp"
#include "troupe/runtime/log.hpp"

namespace troupe::actors {

namespace {

/// One settle request waiting for earlier changes.
struct settle_waiter {
  caf::typed_response_promise<bool> promise;
  storage::row_id conversation = 0;
  /// Changes numbered up to this one were taken before the request.
  std::uint64_t up_to = 0;
};

struct memory_writer_state {
  storage::row_id user = 0;
  store_writer_actor store;
  std::chrono::milliseconds idle_ttl{0};
  std::weak_ptr<detail::memory_writer_registry> registry;
  /// Changes sent to the store_writer and not yet answered: number -> conversation.
  std::map<std::uint64_t, storage::row_id> pending;
  std::uint64_t next = 0;
  std::uint64_t generation = 0;
  std::vector<settle_waiter> waiters;
};

using memory_writer_self = homed_typed_actor<memory_writer_state, memory_writer_actor>*;

bool settled(const memory_writer_state& st, const settle_waiter& w) {
  for (const auto& [number, conversation] : st.pending) {
    if (number > w.up_to) {
      break;
    }
    if (w.conversation == 0 || conversation == w.conversation) {
      return false;
    }
  }
  return true;
}

void schedule_idle(memory_writer_self self) {
  auto& st = self->state;
  ++st.generation;
  if (st.pending.empty()) {
    self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(st.idle_ttl),
                       passivate_atom::value, st.generation);
  }
}

void on_change_done(memory_writer_self self, std::uint64_t number) {
  auto& st = self->state;
  st.pending.erase(number);
  std::erase_if(st.waiters, [&](settle_waiter& w) {
    if (!settled(st, w)) {
      return false;
    }
    w.promise.deliver(true);
    return true;
  });
  schedule_idle(self);
}

memory_writer_actor::behavior_type
memory_writer(memory_writer_self self, storage::row_id user, store_writer_actor store,
              std::chrono::milliseconds idle_ttl,
              std::weak_ptr<detail::memory_writer_registry> reg) {
  auto& st = self->state;
  st.user = user;
  st.store = std::move(store);
  st.idle_ttl = idle_ttl;
  st.registry = std::move(reg);
  schedule_idle(self);
  return {
      [self](write_atom, storage::memory_change& change) -> caf::result<memory_write_reply> {
        auto& s = self->state;
        const auto number = ++s.next;
        const auto conversation = change.what == storage::memory_change::action::propose
                                      ? change.proposal.conversation_id.value_or(0)
                                      : 0;
        s.pending.emplace(number, conversation);
        ++s.generation;
        auto promise = self->make_response_promise<memory_write_reply>();
        auto result = std::make_shared<storage::memory_write_result>();
        // One sender's writes are applied in the order sent: this user's changes apply in
        // the order they reached this actor.
        self->request(s.store, store_write_timeout, write_atom::value,
                      storage::memory_change_op(std::move(change), result))
            .then(
                [self, promise, result, number](write_result& r) mutable {
                  if (r) {
                    promise.deliver(memory_write_reply{std::move(*result)});
                  } else {
                    promise.deliver(memory_write_reply{tl::unexpected(r.error())});
                  }
                  on_change_done(self, number);
                },
                [self, promise, number](caf::error& e) mutable {
                  promise.deliver(memory_write_reply{tl::unexpected(from_caf_error(e))});
                  on_change_done(self, number);
                });
        return promise;
      },
      [self](settle_atom, storage::row_id conversation) -> caf::result<bool> {
        auto& s = self->state;
        settle_waiter w;
        w.conversation = conversation;
        w.up_to = s.next;
        if (settled(s, w)) {
          return true;
        }
        w.promise = self->make_response_promise<bool>();
        auto promise = w.promise;
        s.waiters.push_back(std::move(w));
        return promise;
      },
      [self](passivate_atom, std::uint64_t generation) {
        auto& s = self->state;
        if (generation != s.generation || !s.pending.empty()) {
          return;
        }
        if (auto registry = s.registry.lock()) {
          std::lock_guard lock(registry->mutex);
          auto it = registry->writers.find(s.user);
          if (it != registry->writers.end() && it->second.address() == self->address()) {
            registry->writers.erase(it);
          }
        }
        self->quit();
      },
  };
}

} // namespace

memory_service::memory_service(caf::actor_system& system, store_writer_actor store,
                               std::shared_ptr<storage::read_pool> reads,
                               std::shared_ptr<tools::blocking_pool> pool,
                               memory_service_options options)
    : system_(system), store_(std::move(store)), reads_(std::move(reads)),
      pool_(pool ? std::move(pool) : tools::blocking_pool::shared_default()), options_(options),
      registry_(std::make_shared<detail::memory_writer_registry>()) {}

memory_service::~memory_service() {
  stop();
}

memory_writer_actor memory_service::writer(storage::row_id user) {
  std::lock_guard lock(registry_->mutex);
  if (registry_->stopped) {
    return memory_writer_actor{};
  }
  auto& slot = registry_->writers[user];
  if (!slot) {
    slot = system_.spawn(memory_writer, user, store_, options_.idle_ttl,
                         std::weak_ptr<detail::memory_writer_registry>(registry_));
  }
  return slot;
}

boost::asio::awaitable<expected<storage::memory_write_result>>
memory_service::write(storage::row_id user, storage::memory_change change) {
  // A writer that passivated between the lookup and the message drops it unread: ask
  // again, of the writer spawned in its place.
  for (int attempt = 0;; ++attempt) {
    auto target = writer(user);
    if (!target) {
      co_return fail(errc::unavailable, "the memory service has stopped");
    }
    auto asking = ask<memory_write_reply>(
        system_, target, store_write_timeout + std::chrono::seconds(5), write_atom::value, change);
    auto answer = co_await std::move(asking);
    if (answer) {
      co_return std::move(*answer);
    }
    if (answer.error().code != errc::unavailable || attempt >= 3) {
      co_return tl::unexpected(answer.error());
    }
  }
}

boost::asio::awaitable<expected<void>> memory_service::settle(storage::row_id user,
                                                              storage::row_id conversation) {
  memory_writer_actor target;
  {
    std::lock_guard lock(registry_->mutex);
    if (auto it = registry_->writers.find(user); it != registry_->writers.end()) {
      target = it->second;
    }
  }
  if (!target) {
    co_return expected<void>{}; // no writer: nothing pending
  }
  auto asking = ask<bool>(system_, target, store_write_timeout + std::chrono::seconds(5),
                          settle_atom::value, conversation);
  auto answer = co_await std::move(asking);
  if (!answer && answer.error().code != errc::unavailable) {
    co_return tl::unexpected(answer.error());
  }
  // A writer that is gone has nothing pending (it passivates only then).
  co_return expected<void>{};
}

boost::asio::awaitable<expected<std::vector<storage::search_hit>>>
memory_service::search_messages(storage::search_query q) {
  store_writer_actor store;
  {
    std::lock_guard lock(registry_->mutex);
    store = store_; // stop() drops it under this lock
  }
  if (store) {
    auto indexing = index_messages(system_, std::move(store), options_.read_timeout);
    if (auto indexed = co_await std::move(indexing); !indexed) {
      // The search still runs; it misses only what the last pass interval stored.
      log::warn("memory: indexing before a session search failed: {}", indexed.error().message);
    }
  }
  auto reading = read<std::vector<storage::search_hit>>(
      [q = std::move(q)](storage::connection& c) { return storage::search_messages(c, q); });
  co_return co_await std::move(reading);
}

boost::asio::awaitable<expected<memory::rendered_block>>
memory_service::recall(memory_recall_request request) {
  auto limits = request.limits;
  storage::recall_query q;
  q.user_id = request.user;
  q.agent_id = request.agent;
  q.text = std::move(request.objective);
  q.max_items = limits.max_items;
  q.max_pinned = limits.max_pinned;
  auto reading = read<memory::rendered_block>(
      [q = std::move(q), limits](storage::connection& c) -> expected<memory::rendered_block> {
        auto found = storage::recall_memories(c, q);
        if (!found) {
          return tl::unexpected(found.error());
        }
        const auto to_block = [](const std::vector<storage::memory_item_record>& items) {
          std::vector<memory::block_item> out;
          out.reserve(items.size());
          for (const auto& m : items) {
            out.push_back({m.id, m.kind, m.memory_key, m.content, m.summary, m.pinned});
          }
          return out;
        };
        const auto ranked = to_block(found->ranked);
        const auto pinned = to_block(found->pinned);
        return memory::render_block(ranked, pinned, limits);
      });
  co_return co_await std::move(reading);
}

std::size_t memory_service::live_writers() const {
  std::lock_guard lock(registry_->mutex);
  return registry_->writers.size();
}

void memory_service::stop() {
  std::unordered_map<storage::row_id, memory_writer_actor> writers;
  {
    std::lock_guard lock(registry_->mutex);
    registry_->stopped = true;
    writers.swap(registry_->writers);
    // The store_writer is detached: the actor system waits for it until its last handle
    // is gone, and this service may outlive the system (the routes hold it).
    store_ = store_writer_actor{};
  }
  for (auto& [user, actor] : writers) {
    caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
  }
}

} // namespace troupe::actors
