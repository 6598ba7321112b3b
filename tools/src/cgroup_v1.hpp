#pragma once

// Private to troupe_tools: a cgroup v1 group per sandboxed run (pids and memory
// controllers), used when the hierarchy is writable.

#include <filesystem>
#include <string>
#include <vector>

#include <sys/types.h>

namespace troupe::tools::detail {

/// One run's cgroups. Controllers that cannot be created are skipped; `in_force` says
/// which limits hold. Removing the group kills anything still in it (waiting a bounded
/// time for it to leave, which callers avoid by waiting for the tree's exit first).
class cgroup_v1 {
public:
  cgroup_v1(const std::filesystem::path& root, const std::string& name);
  ~cgroup_v1();
  cgroup_v1(const cgroup_v1&) = delete;
  cgroup_v1& operator=(const cgroup_v1&) = delete;

  /// Sets pids.max; true when in force.
  bool limit_pids(unsigned max_pids);
  /// Sets memory.limit_in_bytes (and memsw when present); true when in force.
  bool limit_memory(std::size_t bytes);

  /// The `tasks` files a new single-threaded process writes "0" into to move itself into
  /// the group (paths made before the child starts, so that it allocates nothing). A thread
  /// moving itself skips the global lock a cgroup.procs write takes (an RCU grace period).
  const std::vector<std::string>& tasks_files() const noexcept {
    return tasks_files_;
  }

  /// SIGKILLs every process now in the group; returns how many there were (0: empty).
  /// Does not wait: a killed process leaves the group when it has exited.
  std::size_t kill_pass();
  /// True when the memory controller recorded an out-of-memory kill.
  bool oom_killed() const;

private:
  std::filesystem::path pids_dir_;
  std::filesystem::path memory_dir_;
  std::vector<std::string> tasks_files_;
};

} // namespace troupe::tools::detail
