#pragma once

// Checkpoints of the write-ahead log, off the writer's thread.
//
// In WAL mode every commit appends pages to the -wal file; a checkpoint copies them back
// into the database and, with synchronous = NORMAL, is the only point that waits for
// fsync. SQLite's default runs it inside whichever commit crosses 1,000 frames, so one
// answer in a few dozen paid for copying a thousand pages and two fsyncs. The
// checkpointer takes that over: the writer connection's commit hook only tells it how
// many frames the WAL holds, and a thread of its own, with its own connection, runs a
// PASSIVE checkpoint (which never blocks the writer) once `checkpoint_frames` frames have
// been appended since the last one.
//
// A checkpoint alone does not shorten the log: SQLite writes it from its start again only
// when the writer begins a transaction with every frame already copied back, and a writer
// that commits while the other thread checkpoints (with two fsyncs) never finds that
// moment. Counting the WAL's size instead of the new frames then made every commit wake
// the checkpointer, and the log grew by tens of megabytes a minute. So once the log holds
// `restart_frames`, the writer's own commit hook copies the few frames the thread has not
// (nothing can be appended meanwhile), and its next transaction restarts the log.

#include <cstdint>
#include <filesystem>
#include <memory>

#include "troupe/runtime/error.hpp"
#include "troupe/storage/connection.hpp"

namespace troupe::storage {

struct wal_checkpointer_options {
  /// Frames appended since the last checkpoint beyond which the thread runs one (SQLite's
  /// own default for the log's size: 1,000).
  int checkpoint_frames = 1000;
  /// Frames in the WAL beyond which the writer, after its commit, copies the rest itself so
  /// that its next transaction writes the log from the start (a value below
  /// `checkpoint_frames` counts as `checkpoint_frames`).
  int restart_frames = 4000;
};

struct wal_checkpointer_stats {
  std::uint64_t checkpoints = 0;   ///< checkpoints run
  std::uint64_t complete = 0;      ///< of those, the ones that copied the whole WAL
  std::uint64_t frames_copied = 0; ///< WAL frames copied back into the database
  /// Checkpoints the writer ran after a commit because the log had reached restart_frames.
  std::uint64_t writer_checkpoints = 0;
  std::uint64_t restarts = 0; ///< commits that found the log written from its start again
  std::uint64_t failures = 0; ///< checkpoints that returned an error
  /// Checkpoints that found another connection checkpointing or recovering the WAL
  /// (SQLITE_BUSY: a passive checkpoint does not wait); the next commit past the threshold
  /// asks again.
  std::uint64_t busy = 0;
  int largest_wal_frames = 0; ///< the most frames a commit saw in the WAL
  int last_wal_frames = 0;    ///< the frames the last commit saw
};

class wal_checkpointer {
public:
  /// Opens its own connection to `database` and takes over the checkpoints of `writer`
  /// (whose automatic checkpoint it turns off). `writer` may be moved afterwards and may
  /// outlive the checkpointer (its hook then does nothing).
  static expected<std::unique_ptr<wal_checkpointer>>
  start(const std::filesystem::path& database, connection& writer,
        const wal_checkpointer_options& options = {});

  /// Stops the thread (a checkpoint under way finishes first).
  ~wal_checkpointer();
  wal_checkpointer(const wal_checkpointer&) = delete;
  wal_checkpointer& operator=(const wal_checkpointer&) = delete;

  /// Runs a checkpoint soon, however few frames the WAL holds; any thread.
  void request();

  /// A snapshot of the counters; any thread.
  wal_checkpointer_stats stats() const;

  struct shared_state;

private:
  explicit wal_checkpointer(std::shared_ptr<shared_state> state);
  std::shared_ptr<shared_state> state_;
};

} // namespace troupe::storage
