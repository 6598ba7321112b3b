#pragma once

/// \file
/// Durable memory at run time (issue 15): the per-user memory writer actors and the
/// service that finds them, recalls memories for a run's prompt and reads for the
/// memory tools.
///
/// The memory writer of a user is spawned on first use and passivates (quits) after
/// `idle_ttl` with nothing pending. It sends each change to the store_writer as a
/// `memory_change_op`; the store_writer applies one sender's writes in order, so a
/// user's changes apply in the order they reached the writer, each reading the state the
/// previous one left (no lost update however many runs propose at once).
///
/// Its interface is `memory_writer_actor` below.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <boost/asio/awaitable.hpp>
#include <caf/all.hpp>

#include "troupe/actors/memory_facade.hpp"
#include "troupe/actors/store_writer.hpp"
#include "troupe/runtime/memory_rules.hpp"
#include "troupe/storage/database.hpp"
#include "troupe/storage/memory.hpp"
#include "troupe/storage/search.hpp"
#include "troupe/tools/blocking_pool.hpp"

namespace troupe::actors {

/// What a memory writer answers for a change.
using memory_write_reply = expected<storage::memory_write_result>;

using settle_atom = caf::atom_constant<caf::atom("settle")>;
/// The writer's own idle timer.
using passivate_atom = caf::atom_constant<caf::atom("passivate")>;

/// A user's memory writer.
///   (write_atom, memory_change) -> memory_write_reply   applied once durable
///   (settle_atom, conversation) -> bool                 answered once every change
///                                                       taken before from that
///                                                       conversation (0: any) is done
/// Sent to itself: (passivate_atom, generation).
using memory_writer_actor =
    caf::typed_actor<caf::replies_to<write_atom, storage::memory_change>::with<memory_write_reply>,
                     caf::replies_to<settle_atom, storage::row_id>::with<bool>,
                     caf::reacts_to<passivate_atom, std::uint64_t>>;

/// What a run asks to recall.
struct memory_recall_request {
  storage::row_id user = 0;
  std::optional<storage::row_id> agent;
  /// The run's objective: recall ranks by it.
  std::string objective;
  memory::block_limits limits;
};

struct memory_service_options {
  /// A writer with nothing pending quits after this long.
  std::chrono::milliseconds idle_ttl{std::chrono::seconds(30)};
  /// How long a read waits for the blocking pool.
  std::chrono::milliseconds read_timeout{std::chrono::seconds(10)};
};

namespace detail {
/// The live writers by user; shared with the writers, which leave it as they passivate.
struct memory_writer_registry {
  std::mutex mutex;
  std::unordered_map<storage::row_id, memory_writer_actor> writers;
  bool stopped = false;
};
/// Users known to have no active memory (issue 15: a recall for them costs nothing).
/// A user enters when a recall read found none and no write of theirs began or ended
/// while it read; any write of the user takes them out, before it is sent and again once
/// answered.
struct memory_presence {
  std::mutex mutex;
  /// Bumped by every write of the user (before and after it).
  std::unordered_map<storage::row_id, std::uint64_t> writes;
  std::unordered_set<storage::row_id> without;
};
} // namespace detail

/// The node's memory: writers by user, recall and reads. Thread-safe.
class memory_service final : public memory_facade {
public:
  memory_service(caf::actor_system& system, store_writer_actor store,
                 std::shared_ptr<storage::read_pool> reads,
                 std::shared_ptr<tools::blocking_pool> pool, memory_service_options options = {});
  ~memory_service() override;

  boost::asio::awaitable<expected<storage::memory_write_result>>
  write(storage::row_id user, storage::memory_change change) override;
  boost::asio::awaitable<expected<void>> settle(storage::row_id user,
                                                storage::row_id conversation) override;

  /// The `<memory_context>` block for a run and the ids of the items in it (read on the
  /// blocking pool; for a user known to have no active memory, an empty block at once).
  boost::asio::awaitable<expected<memory::rendered_block>> recall(memory_recall_request request);

  /// Whether `user` is known to have no active memory (a recall found none and nothing
  /// was written since): a run skips its recall. Cheap: one short lock, no database.
  bool known_without_memories(storage::row_id user) const;
  /// Recalls that read the database (tests: a user without memories costs none).
  std::uint64_t recall_reads() const noexcept {
    return recall_reads_.load(std::memory_order_relaxed);
  }

  /// Runs `job(connection&)` on a read connection on the blocking pool.
  template <class T>
  boost::asio::awaitable<expected<T>> read(std::function<expected<T>(storage::connection&)> job) {
    auto reads = reads_;
    auto on_pool = [reads, job = std::move(job)](const tools::job_control&) {
      return reads->with([&](storage::connection& c) { return job(c); });
    };
    auto running = pool_->run(std::move(on_pool), options_.read_timeout);
    auto ran = co_await std::move(running);
    if (!ran) {
      co_return tl::unexpected(ran.error());
    }
    co_return std::move(*ran);
  }

  /// Searches the messages `q` asks for, after the store writer indexed every message
  /// committed so far (message_index.hpp), so a search finds the turn just taken.
  boost::asio::awaitable<expected<std::vector<storage::search_hit>>>
  search_messages(storage::search_query q) override;

  /// The memory writer of `user`, spawned when it has none (invalid once stopped).
  memory_writer_actor writer(storage::row_id user);

  /// Writers alive now (tests: passivation).
  std::size_t live_writers() const;
  /// Shutdown: every writer exits and the store_writer's handle is dropped; later
  /// changes fail with `unavailable`.
  void stop();

private:
  /// Sends `change` to the user's writer (`write` without the presence bookkeeping).
  boost::asio::awaitable<expected<storage::memory_write_result>>
  write_through(storage::row_id user, storage::memory_change change);

  caf::actor_system& system_;
  store_writer_actor store_;
  std::shared_ptr<storage::read_pool> reads_;
  std::shared_ptr<tools::blocking_pool> pool_;
  memory_service_options options_;
  std::shared_ptr<detail::memory_writer_registry> registry_;
  std::shared_ptr<detail::memory_presence> presence_;
  std::atomic<std::uint64_t> recall_reads_{0};
};

} // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::storage::memory_change)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::memory_write_reply)
