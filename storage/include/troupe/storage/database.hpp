#pragma once

/// \file
/// Opening troupe's database: the writer connection (migrated, recovered), and a small
/// pool of read-only connections for reads. With WAL, readers never block the writer and
/// see the last committed state.

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "troupe/storage/connection.hpp"

namespace troupe::storage {

/// The database file inside a data directory: `<data_dir>/troupe.db`.
std::filesystem::path database_path(const std::filesystem::path& data_dir);

/// Opens the writer connection at `path` (creating the file) and applies migrations.
/// Fails with `conflict` when the schema is newer than this binary. `gather_wal_writes`:
/// connection_options::gather_wal_writes.
expected<connection> open_writer(const std::filesystem::path& path, sync_mode sync,
                                 bool gather_wal_writes = true);

/// What crash recovery found and did.
struct recovery_report {
  /// Runs that were `running` when the process died, now `interrupted`.
  std::int64_t interrupted_runs = 0;
  /// Top-level runs left `running` while waiting for a human's approval: kept `running`,
  /// their approvals pending, for the node to resume (issue 19).
  std::int64_t paused_runs = 0;
};

/// Start-up recovery, on the writer connection before anything else writes: every run
/// left `running` becomes `interrupted` with a step saying why (its pending approvals
/// expire), except a top-level run with a pending approval, which stays `running` to be
/// resumed; then `PRAGMA integrity_check` must answer "ok" (else `io_error` with its
/// findings).
expected<recovery_report> recover(connection& writer);

/// Runs `PRAGMA integrity_check`; fails with `io_error` and the findings unless "ok".
expected<void> check_integrity(connection& c);

/// A fixed set of read-only connections handed out one caller at a time. Thread-safe.
class read_pool {
public:
  /// Opens `size` (at least 1) read-only connections to `path`, which must exist.
  static expected<std::shared_ptr<read_pool>> open(const std::filesystem::path& path,
                                                   unsigned size);

  /// A borrowed connection, returned to the pool when destroyed.
  class lease {
  public:
    lease(read_pool* pool, connection* conn) noexcept : pool_(pool), conn_(conn) {}
    lease(lease&& other) noexcept
        : pool_(std::exchange(other.pool_, nullptr)), conn_(std::exchange(other.conn_, nullptr)) {}
    lease& operator=(lease&&) = delete;
    lease(const lease&) = delete;
    lease& operator=(const lease&) = delete;
    ~lease();
    connection& operator*() const noexcept {
      return *conn_;
    }
    connection* operator->() const noexcept {
      return conn_;
    }

  private:
    read_pool* pool_;
    connection* conn_;
  };

  /// Waits until a connection is free and lends it.
  lease acquire();

  /// Called by every `acquire()`, on the acquiring thread, before it may wait (the node
  /// counts the reads made on a shard's thread). Set it before the pool is shared.
  void on_acquire(std::function<void()> hook) {
    acquire_hook_ = std::move(hook);
  }

  /// Runs `body(connection&)` on a borrowed connection and returns its result.
  template <class F> auto with(F&& body) -> decltype(body(std::declval<connection&>())) {
    auto l = acquire();
    return body(*l);
  }

  unsigned size() const noexcept {
    return static_cast<unsigned>(all_.size());
  }

private:
  read_pool() = default;
  void give_back(connection* conn);

  std::vector<std::unique_ptr<connection>> all_;
  std::vector<connection*> free_;
  std::function<void()> acquire_hook_;
  std::mutex mutex_;
  std::condition_variable available_;
};

} // namespace troupe::storage
