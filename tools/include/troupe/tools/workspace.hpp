#pragma once

/// \file
/// Confinement of file access to an agent's workspace. Paths from the model are
/// resolved lexically (no `..` above the root; absolute paths only inside the workspace,
/// either as the host path or as the sandbox's `/work`), and every open goes through
/// `openat2(RESOLVE_BENEATH)`, so the kernel refuses a symlink that points out — also
/// one swapped in after the check. Only regular files and directories are ever opened for
/// reading or writing: a path is first opened with `O_PATH` (which never blocks and never
/// runs a device driver's open), its type checked with `fstat`, and only then reopened
/// through that descriptor; a FIFO, device or socket is refused with an error naming
/// what it is, so a model (or code it ran) cannot freeze troupe with `mkfifo p; read p`.
///
/// These calls block on the file system: run them on the blocking pool, never on a
/// thread that serves requests.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include "troupe/runtime/error.hpp"

namespace troupe::tools {

/// The path inside the sandbox where the workspace is mounted.
inline constexpr std::string_view sandbox_workspace_root = "/work";

/// An open file descriptor, closed on destruction.
class file_handle {
public:
  file_handle() = default;
  explicit file_handle(int fd) : fd_(fd) {}
  file_handle(file_handle&& other) noexcept;
  file_handle& operator=(file_handle&& other) noexcept;
  file_handle(const file_handle&) = delete;
  file_handle& operator=(const file_handle&) = delete;
  ~file_handle();
  int get() const noexcept {
    return fd_;
  }

private:
  int fd_ = -1;
};

/// What a file is, in words for an error message: "a FIFO", "a character device", …
std::string_view describe_file_type(mode_t mode);

/// One entry found by `workspace::list` or `workspace::walk` (symlinks not followed).
struct workspace_entry {
  /// The name (list) or the workspace-relative path (walk).
  std::string path;
  /// The `st_mode` file type bits (S_IFREG, S_IFDIR, S_IFLNK, S_IFIFO, …).
  mode_t type = 0;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
};

/// Bounds of a walk: entries looked at (of any type), depth, and a stop request checked
/// between entries (e.g. the blocking pool's deadline).
struct walk_limits {
  std::size_t max_entries = 100'000;
  std::size_t max_depth = 64;
  std::function<bool()> should_stop;
};

/// An agent's workspace directory.
class workspace {
public:
  /// Uses `root` (created if missing) as the workspace.
  static expected<workspace> open(const std::filesystem::path& root);

  const std::filesystem::path& root() const noexcept {
    return root_;
  }

  /// The normalized workspace-relative form of `user_path` ("." for the root), or a
  /// `permission_denied` error saying the path leaves the workspace.
  expected<std::string> relative(std::string_view user_path) const;

  /// Opens `relative_path` beneath the root with `flags` (O_CREAT allowed, then `mode`).
  /// Fails with permission_denied when resolution would leave the workspace, not_found
  /// when it does not exist, invalid_argument when it is neither a regular file nor a
  /// directory ("not a regular file: p is a FIFO"), or a directory where O_DIRECTORY was
  /// not asked for writing. With O_NOFOLLOW a final symlink is refused the same way. With
  /// O_PATH the path is only resolved (nothing is opened for I/O).
  expected<file_handle> open_file(std::string_view relative_path, int flags,
                                  unsigned mode = 0644) const;

  /// Reads a whole file (at most `max_bytes`; larger is limit_exceeded).
  expected<std::string> read_file(std::string_view relative_path, std::size_t max_bytes) const;
  /// Writes (or appends to) a file, creating parent directories beneath the root.
  expected<std::uint64_t> write_file(std::string_view relative_path, std::string_view content,
                                     bool append = false) const;
  /// Creates `relative_dir` and its parents beneath the root.
  expected<void> make_directories(std::string_view relative_dir) const;

  /// The entries of directory `relative_dir`, sorted by name, at most `max_entries`.
  expected<std::vector<workspace_entry>> list(std::string_view relative_dir,
                                              std::size_t max_entries) const;

  /// Visits every entry beneath `relative_dir` depth-first (symlinks are not followed,
  /// nothing but directories is opened), giving workspace-relative paths. `visit`
  /// returns false to stop. Ends early, without an error, at the limits.
  expected<void> walk(std::string_view relative_dir,
                      const std::function<bool(const workspace_entry&)>& visit,
                      const walk_limits& limits = {}) const;

  /// Size and modification time of every regular file, by relative path (symlinks are
  /// not followed). Used to find what a run created or changed.
  std::map<std::string, std::pair<std::uint64_t, std::int64_t>>
  snapshot(std::size_t max_files = 10'000) const;

private:
  explicit workspace(std::filesystem::path root) : root_(std::move(root)) {}
  std::filesystem::path root_;
};

/// The files in `after` that are new or changed compared to `before`, sorted.
std::vector<std::string>
changed_files(const std::map<std::string, std::pair<std::uint64_t, std::int64_t>>& before,
              const std::map<std::string, std::pair<std::uint64_t, std::int64_t>>& after);

/// The MIME type of a file from its extension, refined by its first bytes (PNG, JPEG,
/// GIF, PDF, ZIP, text versus binary).
std::string detect_mime(std::string_view path, std::string_view head);

} // namespace troupe::tools
