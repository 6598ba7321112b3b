#include "troupe/actors/store_writer.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "troupe/actors/bridge.hpp"
#include "troupe/actors/shard_scheduler.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/storage/batch.hpp"
#include "troupe/storage/message_index.hpp"

namespace troupe::actors {

error write_backlog::overloaded() const {
  return error{errc::overloaded,
               fmt::format("storage is overloaded: {} writes are waiting for the database "
                           "(storage.writer_max_queue = {}); retry shortly",
                           waiting(), max_queue_)};
}

namespace {

struct pending_write {
  storage::write_op op;
  caf::typed_response_promise<write_result> promise;
};

struct store_writer_state {
  std::shared_ptr<storage::connection> db;
  store_writer_options options;
  std::vector<pending_write> queue;
  // Identifies the armed timer; a tick for an older batch is ignored.
  std::uint64_t batch_generation = 0;
  bool timer_armed = false;
  // An indexing pass is due (its tick is on the way).
  bool index_armed = false;
  store_writer_stats stats;
  static inline const char* name = "store_writer";
};

using writer_pointer = homed_typed_actor<store_writer_state, store_writer_actor>*;

/// Indexes pending messages (message_index.hpp): up to one batch; answers how many.
std::uint64_t index_messages(writer_pointer self) {
  auto& st = self->state;
  st.index_armed = false;
  if (!st.db) {
    return 0;
  }
  auto indexed = storage::index_pending_messages(*st.db, message_index_batch);
  if (!indexed) {
    log::warn("indexing stored messages for search failed (they stay searchable by a scan, "
              "and the next pass tries again): {}",
              indexed.error().message);
    return 0;
  }
  st.stats.messages_indexed += static_cast<std::uint64_t>(*indexed);
  if (*indexed >= message_index_batch) {
    // More are waiting: the next pass comes right after what is queued now.
    st.index_armed = true;
    self->send(self, index_tick_atom::value);
  }
  return static_cast<std::uint64_t>(*indexed);
}

/// Arms the indexing tick after a commit, once.
void arm_index(writer_pointer self) {
  auto& st = self->state;
  if (st.index_armed || !st.db) {
    return;
  }
  st.index_armed = true;
  self->delayed_send(self, message_index_delay, index_tick_atom::value);
}

void flush(writer_pointer self) {
  auto& st = self->state;
  st.timer_armed = false;
  ++st.batch_generation;
  if (st.queue.empty()) {
    return;
  }
  auto batch = std::exchange(st.queue, {});
  std::vector<storage::write_op> ops;
  ops.reserve(batch.size());
  for (auto& p : batch) {
    ops.push_back(std::move(p.op));
  }
  auto results = st.db
                     ? storage::apply_batch(*st.db, ops)
                     : std::vector<write_result>(
                           ops.size(), fail(errc::unavailable, "the store writer has no database"));
  ++st.stats.batches;
  st.stats.writes += batch.size();
  st.stats.largest_batch = std::max<std::uint64_t>(st.stats.largest_batch, batch.size());
  // Only now, after COMMIT returned, is any caller answered.
  for (std::size_t i = 0; i < batch.size(); ++i) {
    write_result r = i < results.size()
                         ? std::move(results[i])
                         : fail(errc::internal, "the batch produced no result for this write");
    if (!r) {
      ++st.stats.failed_writes;
    }
    batch[i].promise.deliver(std::move(r));
  }
  arm_index(self);
}

store_writer_actor::behavior_type store_writer_behavior(writer_pointer self,
                                                        std::shared_ptr<storage::connection> db,
                                                        store_writer_options options) {
  self->state.db = std::move(db);
  self->state.options = options;
  self->state.options.group_commit_max = std::max<std::size_t>(1, options.group_commit_max);
  // Commit what is queued before stopping, so no accepted write is dropped at shutdown.
  self->set_exit_handler([self](caf::exit_msg& msg) {
    flush(self);
    // What was stored enters the index before the writer goes (the next start would
    // index it otherwise).
    while (index_messages(self) >= static_cast<std::uint64_t>(message_index_batch)) {
    }
    self->quit(msg.reason);
  });
  // Messages stored before a crash and not yet indexed.
  arm_index(self);
  return {
      [self](write_atom, storage::write_op& op) -> caf::typed_response_promise<write_result> {
        auto& st = self->state;
        auto promise = self->make_response_promise<write_result>();
        st.queue.push_back({std::move(op), promise});
        if (st.queue.size() >= st.options.group_commit_max) {
          flush(self);
        } else if (!st.timer_armed) {
          st.timer_armed = true;
          if (st.options.group_commit.count() == 0) {
            self->send(self, flush_atom::value, st.batch_generation);
          } else {
            self->delayed_send(self, st.options.group_commit, flush_atom::value,
                               st.batch_generation);
          }
        }
        return promise;
      },
      [self](flush_atom, std::uint64_t generation) {
        if (generation == self->state.batch_generation && self->state.timer_armed) {
          flush(self);
        }
      },
      [self](stats_atom) -> store_writer_stats { return self->state.stats; },
      [self](index_tick_atom) { index_messages(self); },
      [self](index_atom) -> std::uint64_t {
        // A pass now; a tick already on its way finds little or nothing left.
        return index_messages(self);
      },
  };
}

} // namespace

store_writer_actor spawn_store_writer(caf::actor_system& system,
                                      std::shared_ptr<storage::connection> writer,
                                      store_writer_options options) {
  return system.spawn<caf::detached>(store_writer_behavior, std::move(writer), options);
}

boost::asio::awaitable<write_result> write(caf::actor_system& system, store_writer_actor writer,
                                           storage::write_op op,
                                           std::chrono::milliseconds timeout) {
  auto answer = co_await ask<write_result>(system, std::move(writer), timeout, write_atom::value,
                                           std::move(op));
  if (!answer) {
    co_return tl::unexpected(answer.error());
  }
  co_return std::move(*answer);
}

boost::asio::awaitable<expected<std::uint64_t>> index_messages(caf::actor_system& system,
                                                               store_writer_actor writer,
                                                               std::chrono::milliseconds timeout) {
  co_return co_await ask<std::uint64_t>(system, std::move(writer), timeout, index_atom::value);
}

write_result write_blocking(caf::actor_system& system, const store_writer_actor& writer,
                            storage::write_op op, std::chrono::milliseconds timeout) {
  caf::scoped_actor self{system};
  write_result result = fail(errc::internal, "no answer from the store writer");
  self->request(writer, std::chrono::duration_cast<caf::timespan>(timeout), write_atom::value,
                std::move(op))
      .receive([&](write_result& r) { result = std::move(r); },
               [&](caf::error& e) { result = tl::unexpected(from_caf_error(e)); });
  return result;
}

expected<store_writer_stats> writer_stats(caf::actor_system& system,
                                          const store_writer_actor& writer) {
  caf::scoped_actor self{system};
  expected<store_writer_stats> result = fail(errc::internal, "no answer from the store writer");
  self->request(writer, std::chrono::seconds(10), stats_atom::value)
      .receive([&](store_writer_stats& s) { result = s; },
               [&](caf::error& e) { result = tl::unexpected(from_caf_error(e)); });
  return result;
}

} // namespace troupe::actors
