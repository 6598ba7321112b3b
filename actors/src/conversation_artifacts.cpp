// A run's artifacts: copied out of its conversation's workspace into the files directory
// on the blocking pool, then recorded as `files` rows, before the turn ends.

#include "conversation_state.hpp"

#include <algorithm>
#include <filesystem>
#include <utility>

#include <fmt/format.h>

#include "troupe/actors/bridge.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/storage/file_store.hpp"
#include "troupe/storage/repositories.hpp"
#include "troupe/storage/write_op.hpp"
#include "troupe/tools/blocking_pool.hpp"
#include "troupe/tools/workspace.hpp"

namespace troupe::actors::detail {

namespace {

// Largest run artifact copied into the files store.
constexpr std::size_t max_artifact_bytes = std::size_t{256} << 20;
// How long copying a run's artifacts into the files directory may take.
constexpr auto artifact_copy_timeout = std::chrono::seconds(60);

/// Where a run's artifacts are copied from and to, and whose files they become.
struct artifact_target {
  std::filesystem::path workspace;
  std::filesystem::path files_dir;
  storage::row_id owner_user = 0;
  storage::row_id conversation_row = 0;
};

/// A run's artifacts once their bytes are in the files directory: the artifacts with
/// their file ids filled in, the `files` rows to insert, and the steps of those that
/// could not be stored.
struct copied_artifacts {
  std::vector<harness::artifact> artifacts;
  std::vector<storage::file_record> rows;
  std::vector<run_step> failures;
};

/// Reads each artifact from the workspace (regular files only, without following links or
/// waiting on special files: workspace::read_file), stores its bytes and hashes them. It
/// blocks: run it on the blocking pool.
copied_artifacts copy_artifacts(std::vector<harness::artifact> artifacts,
                                const artifact_target& target, const tools::job_control* control) {
  copied_artifacts out;
  auto ws = tools::workspace::open(target.workspace);
  for (auto& a : artifacts) {
    if (!a.file_id.empty() || a.path.empty() || !ws) {
      continue;
    }
    if (control != nullptr && control->should_stop()) {
      out.failures.push_back(run_step{"files", "store_artifact", "failed",
                                      fmt::format("{}: out of time to store it", a.path)});
      continue;
    }
    auto relative = ws->relative(a.path);
    auto bytes = relative ? ws->read_file(*relative, max_artifact_bytes)
                          : expected<std::string>(tl::unexpected(relative.error()));
    if (!bytes) {
      out.failures.push_back(run_step{"files", "store_artifact", "failed",
                                      fmt::format("{}: {}", a.path, bytes.error().message)});
      continue;
    }
    auto stored = storage::store_file_bytes(target.files_dir, *bytes);
    if (!stored) {
      out.failures.push_back(run_step{"files", "store_artifact", "failed",
                                      fmt::format("{}: {}", a.path, stored.error().message)});
      continue;
    }
    storage::file_record f;
    f.uuid = new_uuid();
    f.owner_user_id = target.owner_user;
    f.conversation_id = target.conversation_row;
    f.kind = "artifact";
    f.name = std::filesystem::path(*relative).filename().string();
    f.mime_type = a.mime.empty() ? tools::detect_mime(*relative, *bytes) : a.mime;
    f.size_bytes = static_cast<std::int64_t>(bytes->size());
    f.sha256 = sha256_hex(*bytes);
    f.storage_path = (std::filesystem::path("files") / *stored).string();
    f.created_at = unix_millis_now();
    a.file_id = f.uuid;
    a.mime = f.mime_type;
    a.size = static_cast<std::uint64_t>(f.size_bytes);
    if (a.name.empty()) {
      a.name = f.name;
    }
    out.rows.push_back(std::move(f));
  }
  out.artifacts = std::move(artifacts);
  return out;
}

/// `copy_artifacts` on the pool, within `artifact_copy_timeout`. By value: a coroutine.
asio::awaitable<expected<copied_artifacts>>
copy_artifacts_on(std::shared_ptr<tools::blocking_pool> pool,
                  std::vector<harness::artifact> artifacts, artifact_target target) {
  auto job = [artifacts = std::move(artifacts),
              target = std::move(target)](const tools::job_control& control) mutable {
    return copy_artifacts(std::move(artifacts), target, &control);
  };
  auto running = pool->run(std::move(job), artifact_copy_timeout);
  auto copied = co_await std::move(running);
  co_return copied;
}

/// Inserts the rows of the copied artifacts in one write, then ends the turn.
void record_artifacts(conversation_self self, run_result result, copied_artifacts copied) {
  auto& st = self->state;
  for (auto& failure : copied.failures) {
    result.steps.push_back(std::move(failure));
  }
  result.artifacts = std::move(copied.artifacts);
  auto rows = std::move(copied.rows);
  if (rows.empty()) {
    end_turn(self, std::move(result));
    return;
  }
  const auto run_uuid = result.run_id;
  auto op = storage::make_write(
      "store artifacts",
      [rows = std::move(rows), run_uuid](storage::connection& c) -> expected<storage::row_id> {
        auto run = storage::find_run_by_uuid(c, run_uuid);
        storage::row_id last = 0;
        for (auto f : rows) {
          if (run) {
            f.run_id = run->id;
          }
          auto id = storage::insert_file(c, f);
          if (!id) {
            return tl::unexpected(id.error());
          }
          last = *id;
        }
        return last;
      });
  auto shared = std::make_shared<run_result>(std::move(result));
  // The rows were not written: the files stay named by their workspace paths only.
  auto ended = [self, shared](std::optional<std::string> failure) {
    if (failure) {
      for (auto& a : shared->artifacts) {
        a.file_id.clear();
      }
      shared->steps.push_back(run_step{"files", "store_artifact", "failed", *failure});
    }
    end_turn(self, std::move(*shared));
  };
  self->request(*st.spec.io.writer, store_write_timeout, write_atom::value, std::move(op))
      .then(
          [ended](write_result& r) {
            ended(r ? std::nullopt : std::optional<std::string>(r.error().message));
          },
          [ended](caf::error& e) { ended(from_caf_error(e).message); });
}

} // namespace

/// Copies the run's files out of the workspace into the files directory, on the blocking
/// pool, and stores a `files` row for each; then ends the turn. A file that cannot be
/// read is left out (the answer still names it) and logged on the result's steps.
void store_artifacts(conversation_self self, run_result result) {
  auto& st = self->state;
  const bool can_store = st.spec.io.writer && st.spec.owner_user != 0 &&
                         !st.spec.files_dir.empty() && st.spec.conversation_row != 0;
  const bool any =
      std::any_of(result.artifacts.begin(), result.artifacts.end(),
                  [](const harness::artifact& a) { return a.file_id.empty() && !a.path.empty(); });
  if (!can_store || !any) {
    end_turn(self, std::move(result));
    return;
  }
  artifact_target target{st.spec.workspace, st.spec.files_dir, st.spec.owner_user,
                         st.spec.conversation_row};
  auto* http = st.spec.io.http_here();
  if (http == nullptr || !st.spec.io.blocking) {
    // No executor to wait on (a bare conversation in a test): copy here.
    auto copied = copy_artifacts(result.artifacts, target, nullptr);
    record_artifacts(self, std::move(result), std::move(copied));
    return;
  }
  auto shared = std::make_shared<run_result>(std::move(result));
  start_io(self, http->get_executor(),
           copy_artifacts_on(st.spec.io.blocking, shared->artifacts, std::move(target)),
           [self, shared](expected<expected<copied_artifacts>> r) {
             if (r && *r) {
               record_artifacts(self, std::move(*shared), std::move(**r));
               return;
             }
             const auto& e = !r ? r.error() : r->error();
             shared->steps.push_back(
                 run_step{"files", "store_artifact", "failed",
                          fmt::format("the run's files could not be stored: {}", e.message)});
             end_turn(self, std::move(*shared));
           });
}

} // namespace troupe::actors::detail
