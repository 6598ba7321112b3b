#pragma once

/// \file
/// The store_writer: the only actor that writes the database. It gathers writes that
/// arrive within `group_commit` (or until `group_commit_max` are waiting) into one
/// transaction, each write in its own savepoint, and answers every caller only after the
/// batch has committed. It runs detached (its own thread), so SQLite's blocking I/O never
/// stalls the actor scheduler. Reads do not go through it: use the read pool.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include <boost/asio/awaitable.hpp>
#include <caf/all.hpp>

#include "troupe/runtime/error.hpp"
#include "troupe/storage/connection.hpp"
#include "troupe/storage/write_op.hpp"

namespace troupe::actors {

using write_atom = caf::atom_constant<caf::atom("write")>;
using stats_atom = caf::atom_constant<caf::atom("stats")>;
using flush_atom = caf::atom_constant<caf::atom("flush")>;
using index_atom = caf::atom_constant<caf::atom("index")>;
using index_tick_atom = caf::atom_constant<caf::atom("indextick")>;

/// A write's outcome: the row id it produced (0 for none) or why it failed.
using write_result = expected<std::int64_t>;

/// Counters the writer keeps; tests assert on them, `/metrics` may export them.
struct store_writer_stats {
  /// Transactions committed (or attempted).
  std::uint64_t batches = 0;
  /// Writes applied, successful or not.
  std::uint64_t writes = 0;
  /// Writes answered with an error.
  std::uint64_t failed_writes = 0;
  /// The most writes one transaction carried.
  std::uint64_t largest_batch = 0;
  /// Messages put into the full-text index (message_index.hpp).
  std::uint64_t messages_indexed = 0;
};

/// The writer's interface: `write` answers when the write is durable (committed);
/// `stats` reports the counters; `flush` is its own group-commit timer tick; `index_tick`
/// its tick for indexing the messages stored since the last pass (message_index.hpp);
/// `index` runs a pass now and answers how many messages it indexed (for whoever must find
/// every committed message in the full-text index: session search, tests).
using store_writer_actor =
    caf::typed_actor<caf::replies_to<write_atom, storage::write_op>::with<write_result>,
                     caf::replies_to<stats_atom>::with<store_writer_stats>,
                     caf::reacts_to<flush_atom, std::uint64_t>, caf::reacts_to<index_tick_atom>,
                     caf::replies_to<index_atom>::with<std::uint64_t>>;

/// How long after a commit the writer indexes the messages stored meanwhile: long enough
/// to gather many (one FTS5 segment for all of them), short enough that a search without
/// its own pass (`index_atom`) misses few.
inline constexpr std::chrono::milliseconds message_index_delay{50};
/// The most messages one indexing pass takes; more wait for the next pass, right after.
inline constexpr std::int64_t message_index_batch = 2000;

/// How long an actor or route waits for the writer to answer a write. Generous: a write
/// waits for its batch's commit, and a busy disk may take seconds.
inline constexpr std::chrono::milliseconds store_write_timeout{std::chrono::seconds(30)};

/// The store writer's back-pressure (`storage.writer_max_queue`): how many writes that
/// admit new work are waiting for the writer, and how many may. Those writes are a
/// conversation taking a message (its row and its run's) and every write through the
/// store facade (the API's). Whoever makes one counts it here first and, past the bound,
/// refuses the work instead of sending the write (`overloaded()`: HTTP 503 "storage is
/// overloaded"), before anything was acknowledged; the count goes down when the writer
/// answers. The writes of work already admitted (a run's steps, statuses, messages and
/// journal) are never refused: their number follows the admitted work, which stops
/// growing while the writer is behind. Thread-safe.
class write_backlog {
public:
  /// `max_queue` 0: no bound.
  explicit write_backlog(std::size_t max_queue) : max_queue_(max_queue) {}

  /// Counts one write that admits work; false (counting nothing) when `max_queue` such
  /// writes are waiting already.
  bool try_admit() noexcept {
    auto now = waiting_.load(std::memory_order_relaxed);
    do {
      if (max_queue_ != 0 && now >= max_queue_) {
        return false;
      }
    } while (!waiting_.compare_exchange_weak(now, now + 1, std::memory_order_relaxed));
    return true;
  }
  /// The writer answered one counted write.
  void done() noexcept {
    waiting_.fetch_sub(1, std::memory_order_relaxed);
  }
  std::size_t waiting() const noexcept {
    return waiting_.load(std::memory_order_relaxed);
  }
  std::size_t max_queue() const noexcept {
    return max_queue_;
  }
  /// What a refused write's caller is told (`errc::overloaded`, naming the setting).
  error overloaded() const;

private:
  std::size_t max_queue_;
  std::atomic<std::size_t> waiting_{0};
};

/// The default of `storage.writer_max_queue`.
inline constexpr std::size_t default_writer_max_queue = 4096;

/// Group-commit knobs (`[storage]` in the config).
struct store_writer_options {
  /// How long the first write of a batch may wait for company. 0: commit whatever has
  /// queued up in the mailbox by the time the writer gets to it.
  std::chrono::milliseconds group_commit{0};
  /// A batch this large commits at once.
  std::size_t group_commit_max = 1024;
};

/// Spawns the writer, which takes over `writer` (a migrated, read-write connection).
/// When it is told to exit, it commits what is queued before it stops.
store_writer_actor spawn_store_writer(caf::actor_system& system,
                                      std::shared_ptr<storage::connection> writer,
                                      store_writer_options options);

/// For coroutines: sends `op` and resumes when it is durable, failed or timed out.
boost::asio::awaitable<write_result> write(caf::actor_system& system, store_writer_actor writer,
                                           storage::write_op op, std::chrono::milliseconds timeout);

/// For coroutines: asks the writer for an indexing pass now (every message committed
/// before it is then in the full-text index) and resumes with how many it indexed.
boost::asio::awaitable<expected<std::uint64_t>> index_messages(caf::actor_system& system,
                                                               store_writer_actor writer,
                                                               std::chrono::milliseconds timeout);

/// For `main`, tests and tools (blocks the calling thread; never call from an actor).
write_result write_blocking(caf::actor_system& system, const store_writer_actor& writer,
                            storage::write_op op, std::chrono::milliseconds timeout);

/// The writer's counters (blocking, as `write_blocking`).
expected<store_writer_stats> writer_stats(caf::actor_system& system,
                                          const store_writer_actor& writer);

} // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::storage::write_op)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::write_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::store_writer_stats)
