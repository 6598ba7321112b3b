#include "troupe/storage/wal_checkpointer.hpp"

#include <sqlite3.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "troupe/runtime/log.hpp"

namespace troupe::storage {

struct wal_checkpointer::shared_state {
  wal_checkpointer_options options;
  connection db;
  std::mutex mutex;
  std::condition_variable wake;
  bool requested = false;       // guarded by mutex
  bool stopping = false;        // guarded by mutex
  wal_checkpointer_stats stats; // guarded by mutex
  std::thread thread;

  // On the writer's thread, after each of its commits: cheap unless a checkpoint is due.
  void on_commit(int frames) {
    const std::lock_guard lock(mutex);
    stats.last_wal_frames = frames;
    if (frames > stats.largest_wal_frames) {
      stats.largest_wal_frames = frames;
    }
    if (frames < options.checkpoint_frames || requested || stopping) {
      return;
    }
    requested = true;
    wake.notify_one();
  }

  void run() {
    std::unique_lock lock(mutex);
    for (;;) {
      wake.wait(lock, [&] { return requested || stopping; });
      if (stopping) {
        return;
      }
      // Cleared before the checkpoint, not after: a request made while it runs (for frames
      // it may not see) gets a checkpoint of its own.
      requested = false;
      lock.unlock();
      int frames = 0;
      int copied = 0;
      const int rc = sqlite3_wal_checkpoint_v2(db.native_handle(), nullptr,
                                               SQLITE_CHECKPOINT_PASSIVE, &frames, &copied);
      lock.lock();
      if (rc == SQLITE_OK) {
        ++stats.checkpoints;
        if (frames >= 0 && copied == frames) {
          ++stats.complete;
        }
        stats.frames_copied += static_cast<std::uint64_t>(copied > 0 ? copied : 0);
      } else if (rc == SQLITE_BUSY) {
        ++stats.busy;
      } else {
        ++stats.failures;
        log::warn("WAL checkpoint failed: {} (code {})", sqlite3_errmsg(db.native_handle()), rc);
      }
    }
  }
};

expected<std::unique_ptr<wal_checkpointer>>
wal_checkpointer::start(const std::filesystem::path& database, connection& writer,
                        const wal_checkpointer_options& options) {
  if (options.checkpoint_frames < 1) {
    return fail(errc::invalid_argument, fmt::format("checkpoint_frames must be at least 1, not {}",
                                                    options.checkpoint_frames));
  }
  auto db = connection::open(database);
  if (!db) {
    return tl::unexpected(db.error());
  }
  auto state = std::make_shared<shared_state>();
  state->options = options;
  state->db = std::move(*db);
  // The hook holds the state weakly: a writer that outlives the checkpointer stops
  // calling into it, and the state never keeps itself alive through the writer.
  writer.on_wal_commit([weak = std::weak_ptr<shared_state>(state)](int frames) {
    if (auto s = weak.lock()) {
      s->on_commit(frames);
    }
  });
  state->thread = std::thread([raw = state.get()] { raw->run(); });
  return std::unique_ptr<wal_checkpointer>(new wal_checkpointer(std::move(state)));
}

wal_checkpointer::wal_checkpointer(std::shared_ptr<shared_state> state)
    : state_(std::move(state)) {}

wal_checkpointer::~wal_checkpointer() {
  {
    const std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_one();
  if (state_->thread.joinable()) {
    state_->thread.join();
  }
}

void wal_checkpointer::request() {
  {
    const std::lock_guard lock(state_->mutex);
    state_->requested = true;
  }
  state_->wake.notify_one();
}

wal_checkpointer_stats wal_checkpointer::stats() const {
  const std::lock_guard lock(state_->mutex);
  return state_->stats;
}

} // namespace troupe::storage
