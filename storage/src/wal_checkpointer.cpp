#include "troupe/storage/wal_checkpointer.hpp"

#include <sqlite3.h>

#include <algorithm>
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
  sqlite3* writer = nullptr; // the writer's handle, used only inside its own commit hook
  std::mutex mutex;
  std::condition_variable wake;
  bool requested = false;         // guarded by mutex
  bool stopping = false;          // guarded by mutex
  bool checkpointing = false;     // either thread's checkpoint is under way; guarded by mutex
  int backfilled = 0;             // frames of the current log copied back; guarded by mutex
  int next_writer_checkpoint = 0; // log size for the writer's own checkpoint; guarded by mutex
  wal_checkpointer_stats stats;   // guarded by mutex
  std::thread thread;

  // On the writer's thread, after each of its commits: cheap unless a checkpoint is due.
  void on_commit(int frames) {
    std::unique_lock lock(mutex);
    if (frames < stats.last_wal_frames) {
      // The log is being written from its start again: nothing of it is copied yet.
      ++stats.restarts;
      backfilled = 0;
      next_writer_checkpoint = options.restart_frames;
    }
    stats.last_wal_frames = frames;
    stats.largest_wal_frames = std::max(stats.largest_wal_frames, frames);
    if (stopping) {
      return;
    }
    if (frames >= next_writer_checkpoint) {
      // No new request for the thread from here: once its checkpoint under way ends, the
      // next commit copies the rest here, where nothing can be appended meanwhile.
      if (checkpointing) {
        return;
      }
      checkpointing = true;
      lock.unlock();
      int log = 0;
      int copied = 0;
      const int rc =
          sqlite3_wal_checkpoint_v2(writer, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
      lock.lock();
      checkpointing = false;
      record(rc, log, copied, writer);
      ++stats.writer_checkpoints;
      // A reader still using the log keeps it from restarting; try again only after
      // another checkpoint's worth of frames, not after every commit.
      next_writer_checkpoint = frames + options.checkpoint_frames;
      if (requested) {
        wake.notify_one();
      }
      return;
    }
    if (frames - backfilled >= options.checkpoint_frames && !requested) {
      requested = true;
      wake.notify_one();
    }
  }

  // Under the mutex, after a checkpoint on `handle` returned `rc`.
  void record(int rc, int log, int copied, sqlite3* handle) {
    if (rc == SQLITE_OK) {
      ++stats.checkpoints;
      if (log >= 0 && copied == log) {
        ++stats.complete;
      }
      // `copied` counts every copied frame of the log, the earlier checkpoints' too.
      const int before = copied >= backfilled ? backfilled : 0;
      stats.frames_copied += static_cast<std::uint64_t>(std::max(copied - before, 0));
      // A log that restarted while this checkpoint ended holds fewer frames than it
      // copied: nothing of the new one is copied yet. (So does, for a moment, a log whose
      // last commit the hook has not reported yet; the next checkpoint then comes early.)
      backfilled = copied > stats.last_wal_frames ? 0 : std::max(copied, 0);
    } else if (rc == SQLITE_BUSY) {
      ++stats.busy;
    } else {
      ++stats.failures;
      log::warn("WAL checkpoint failed: {} (code {})", sqlite3_errmsg(handle), rc);
    }
  }

  void run() {
    std::unique_lock lock(mutex);
    for (;;) {
      wake.wait(lock, [&] { return (requested && !checkpointing) || stopping; });
      if (stopping) {
        return;
      }
      // Cleared before the checkpoint, not after: a request made while it runs (for frames
      // it may not see) gets a checkpoint of its own.
      requested = false;
      checkpointing = true;
      lock.unlock();
      int log = 0;
      int copied = 0;
      const int rc = sqlite3_wal_checkpoint_v2(db.native_handle(), nullptr,
                                               SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
      lock.lock();
      checkpointing = false;
      record(rc, log, copied, db.native_handle());
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
  state->options.restart_frames = std::max(options.restart_frames, options.checkpoint_frames);
  state->next_writer_checkpoint = state->options.restart_frames;
  state->writer = writer.native_handle();
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
