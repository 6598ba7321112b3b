#include "troupe/storage/database.hpp"

#include <fmt/format.h>

#include "troupe/storage/approvals.hpp"
#include "troupe/storage/repositories.hpp"
#include "troupe/storage/schema.hpp"

namespace troupe::storage {

std::filesystem::path database_path(const std::filesystem::path& data_dir) {
  return data_dir / "troupe.db";
}

expected<connection> open_writer(const std::filesystem::path& path, sync_mode sync,
                                 bool gather_wal_writes) {
  auto conn = connection::open(
      path, {.read_only = false, .sync = sync, .gather_wal_writes = gather_wal_writes});
  if (!conn) {
    return conn;
  }
  if (auto v = migrate(*conn); !v) {
    return tl::unexpected(v.error());
  }
  // A database created by a build without FTS5 gets its index (and backfill) here.
  if (auto idx = ensure_message_index(*conn); !idx) {
    return tl::unexpected(idx.error());
  }
  return conn;
}

expected<void> check_integrity(connection& c) {
  auto st = c.prepare("PRAGMA integrity_check");
  if (!st) {
    return tl::unexpected(st.error());
  }
  std::string findings;
  for (;;) {
    auto row = st->step();
    if (!row) {
      return tl::unexpected(row.error());
    }
    if (!*row) {
      break;
    }
    if (!findings.empty()) {
      findings += "; ";
    }
    findings += st->text(0);
  }
  if (findings != "ok") {
    return fail(errc::io_error, fmt::format("database {} failed its integrity check: {}",
                                            c.path().string(), findings));
  }
  return {};
}

expected<recovery_report> recover(connection& writer) {
  auto report = in_transaction(writer, [](connection& c) -> expected<recovery_report> {
    auto running = list_runs_with_status(c, run_status::running);
    if (!running) {
      return tl::unexpected(running.error());
    }
    recovery_report r;
    for (const auto& run : *running) {
      // A top-level run paused on a human's approval stays as it is: it resumes from its
      // saved round once the node is up (issue 19).
      auto waits = has_pending_approval(c, run.uuid);
      if (!waits) {
        return tl::unexpected(waits.error());
      }
      if (*waits && !run.parent_run_id) {
        ++r.paused_runs;
        continue;
      }
      if (auto gone = expire_run_approvals(c, run.uuid,
                                           "the troupe process stopped while the "
                                           "run waited; it was not resumed");
          !gone) {
        return tl::unexpected(gone.error());
      }
      execution_step_record step;
      step.run_id = run.id;
      step.kind = "recovery";
      step.name = "interrupted";
      step.output_json = R"({"reason":"the troupe process stopped while this run was running; )"
                         R"(it was marked interrupted at the next start"})";
      step.status = "done";
      if (auto s = append_step(c, step); !s) {
        return tl::unexpected(s.error());
      }
      if (auto ok = set_run_status(c, run.id, run_status::interrupted,
                                   "interrupted: the process stopped while the run was running");
          !ok) {
        return tl::unexpected(ok.error());
      }
      ++r.interrupted_runs;
    }
    return r;
  });
  if (!report) {
    return report;
  }
  if (auto ok = check_integrity(writer); !ok) {
    return tl::unexpected(ok.error());
  }
  return report;
}

// --- read_pool ---

expected<std::shared_ptr<read_pool>> read_pool::open(const std::filesystem::path& path,
                                                     unsigned size) {
  std::shared_ptr<read_pool> pool(new read_pool());
  for (unsigned i = 0; i < std::max(1u, size); ++i) {
    auto conn = connection::open(path, {.read_only = true});
    if (!conn) {
      return tl::unexpected(conn.error());
    }
    pool->all_.push_back(std::make_unique<connection>(std::move(*conn)));
    pool->free_.push_back(pool->all_.back().get());
  }
  return pool;
}

read_pool::lease::~lease() {
  if (pool_ != nullptr && conn_ != nullptr) {
    pool_->give_back(conn_);
  }
}

read_pool::lease read_pool::acquire() {
  if (acquire_hook_) {
    acquire_hook_();
  }
  std::unique_lock lock(mutex_);
  available_.wait(lock, [this] { return !free_.empty(); });
  auto* conn = free_.back();
  free_.pop_back();
  return lease(this, conn);
}

void read_pool::give_back(connection* conn) {
  {
    std::lock_guard lock(mutex_);
    free_.push_back(conn);
  }
  available_.notify_one();
}

} // namespace troupe::storage
