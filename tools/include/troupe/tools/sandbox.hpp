#pragma once

/// \file
/// The sandboxed process runner: runs a command under bubblewrap (new user, pid,
/// network, ipc, uts and mount namespaces; only the paths interpreters need, read-only;
/// a private /tmp; the workspace read-write; a seccomp filter), with rlimits applied as
/// an unprivileged uid and cgroup v1 pids/memory limits where writable. Output is
/// captured concurrently with caps; a timeout or cancellation kills the whole tree.
/// If the sandbox cannot be set up the call fails closed: exit code 126, nothing ran.

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "troupe/runtime/error.hpp"

namespace troupe::tools {

/// Resource limits of one sandboxed run.
struct sandbox_limits {
  /// Wall-clock limit; the process tree is killed when it passes.
  std::chrono::milliseconds timeout{60'000};
  /// cgroup memory limit, and the address-space rlimit unless `address_space_mb` is set.
  std::size_t memory_mb = 512;
  /// Address-space rlimit when it must differ from memory_mb (V8 reserves ~1 GiB of
  /// address space at start, so node needs more than it uses); 0: memory_mb.
  std::size_t address_space_mb = 0;
  /// Largest file the process may write (RLIMIT_FSIZE).
  std::size_t max_file_bytes = 256ull * 1024 * 1024;
  /// Processes and threads at most (cgroup pids.max; RLIMIT_NPROC as a backstop).
  unsigned max_processes = 64;
  /// Bytes of stdout and of stderr kept each; the rest is counted and dropped.
  std::size_t output_cap_bytes = 64 * 1024;
};

/// What to run and where.
struct sandbox_request {
  /// Program and arguments, as seen inside the sandbox (e.g. /usr/bin/python3 x.py).
  std::vector<std::string> argv;
  /// Host directory bound read-write at /work (the working directory).
  std::filesystem::path workspace;
  /// Extra environment; the base environment is minimal (PATH, HOME, LANG, TMPDIR).
  std::map<std::string, std::string> env;
  /// Written to the process's stdin, which is then closed.
  std::string stdin_data;
  sandbox_limits limits;
  /// A host directory bound read-only at `read_only_target` (a skill's folder at /skill);
  /// empty: none. Last, with initializers: the positional initializations of the fields
  /// before them stay whole.
  std::filesystem::path read_only_dir{};
  std::string read_only_target = "/skill";
};

/// How the run went.
struct sandbox_result {
  /// The process's exit code; 128+N when killed by signal N; 126 when the sandbox could
  /// not be set up (nothing ran); 124 on timeout (like timeout(1)).
  int exit_code = 0;
  bool timed_out = false;
  bool cancelled = false;
  std::string stdout_text;
  std::string stderr_text;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  std::size_t stdout_bytes = 0;
  std::size_t stderr_bytes = 0;
  std::chrono::milliseconds duration{0};
  /// False only when host execution was explicitly enabled.
  bool sandboxed = true;
  /// The limits that were actually in force, e.g. "cgroup_pids=64", "seccomp".
  std::vector<std::string> limits_in_force;
  /// Why the sandbox failed, or empty.
  std::string error;
};

/// How the runner isolates processes.
struct sandbox_options {
  /// The bubblewrap binary.
  std::filesystem::path bwrap = "/usr/bin/bwrap";
  /// Run on the host without namespaces when true (explicit opt-in; every result then
  /// says sandboxed=false). rlimits and cgroups still apply.
  bool allow_host = false;
  /// The uid/gid the sandbox runs as when troupe runs as root.
  unsigned uid = 65534;
  unsigned gid = 65534;
  /// cgroup v1 mount points; a controller that is missing or not writable is skipped
  /// and the result says which limits were in force.
  std::filesystem::path cgroup_root = "/sys/fs/cgroup";
  /// Host paths bound read-only besides /usr (and the /bin, /lib symlinks into it).
  /// (/etc/alternatives carries the BLAS numpy loads; /etc/matplotlibrc is where Debian
  /// keeps matplotlib's defaults.)
  std::vector<std::filesystem::path> read_only_paths = {
      "/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime",   "/etc/passwd",
      "/etc/group",       "/etc/fonts",        "/etc/matplotlibrc"};
};

/// Runs commands in sandboxes. Thread-safe; each run is independent.
class sandbox_runner {
public:
  explicit sandbox_runner(sandbox_options options = {});

  /// Runs `request` to completion, timeout or cancellation (the awaiting coroutine's
  /// cancellation slot kills the process tree). Never throws for a failing program.
  boost::asio::awaitable<sandbox_result> run(sandbox_request request) const;

  const sandbox_options& options() const noexcept {
    return options_;
  }

private:
  sandbox_options options_;
};

/// The marker appended to captured output that was cut at the cap.
std::string truncation_marker(std::size_t dropped_bytes);

/// When troupe runs as root, sandboxed programs (and bubblewrap) run as `options.uid`.
/// Says whether that uid could reach `dir` by its path: every ancestor searchable by it.
/// Fails with permission_denied naming the first directory that is not; succeeds at once
/// when troupe does not run as root. The runner does not depend on it: as root, it binds
/// the workspace where that uid can reach it, in a private mount namespace, before
/// bubblewrap starts.
expected<void> check_sandbox_reach(const std::filesystem::path& dir,
                                   const sandbox_options& options = {});

} // namespace troupe::tools
