#pragma once

/// \file
/// What `troupe bench` reads about a process from outside, through /proc: resident
/// memory (VmRSS) and its peak (VmHWM, which can be reset), CPU time, and the kernel's
/// socket memory (/proc/net/sockstat, which no process's RSS includes). Linux only.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "troupe/runtime/error.hpp"

namespace troupe::bench {

/// Resident memory of a process, in KiB.
struct process_memory {
  /// VmRSS: resident now.
  std::uint64_t rss_kib = 0;
  /// VmHWM: the peak of VmRSS since start or since the last `reset_peak_memory`.
  std::uint64_t hwm_kib = 0;
  /// Threads of the process.
  std::uint64_t threads = 0;
};

/// Reads /proc/<pid>/status; `not_found` when the process is gone.
expected<process_memory> read_process_memory(pid_t pid);

/// Resets VmHWM to the current RSS (`echo 5 > /proc/<pid>/clear_refs`), so that a later
/// reading is the peak of what happened in between. False when the kernel refused.
bool reset_peak_memory(pid_t pid);

/// User + system CPU time the process has used, from /proc/<pid>/stat.
expected<std::chrono::microseconds> read_process_cpu(pid_t pid);

/// `pid` and its descendants, children before grandchildren (threads excluded), from
/// /proc/<pid>/task/*/children; empty when `pid` is gone.
std::vector<pid_t> process_tree(pid_t pid);

/// Memory of `pid` and its descendants, summed (a page two of them share counts twice;
/// `hwm_kib` sums each process's own peak, which need not have coincided). `not_found`
/// when `pid` is gone.
expected<process_memory> read_tree_memory(pid_t pid);

/// `reset_peak_memory` on every process of the tree; false if any refused.
bool reset_tree_peak_memory(pid_t pid);

/// CPU time of `pid` and its descendants alive now, summed.
expected<std::chrono::microseconds> read_tree_cpu(pid_t pid);

/// Kernel socket counters of the whole machine (/proc/net/sockstat).
struct socket_stats {
  /// TCP sockets in use, allocated, and the pages of memory TCP buffers hold.
  std::uint64_t tcp_inuse = 0;
  std::uint64_t tcp_alloc = 0;
  std::uint64_t tcp_mem_pages = 0;
  /// All sockets in use (any family).
  std::uint64_t sockets_used = 0;

  /// TCP buffer memory in KiB.
  std::uint64_t tcp_mem_kib() const noexcept;
};

expected<socket_stats> read_socket_stats();

/// Sockets the process holds open (its /proc/<pid>/fd entries that are sockets). Unlike
/// the machine-wide counters above, other processes' connections do not move it.
expected<std::uint64_t> count_process_sockets(pid_t pid);

/// Samples a process's VmRSS on its own thread every `interval` and keeps the largest
/// value seen (VmHWM is the kernel's exact peak; the sampler is a cross-check that works
/// where clear_refs is refused).
class memory_sampler {
public:
  /// `tree`: sample the summed RSS of the process and its descendants.
  memory_sampler(pid_t pid, std::chrono::milliseconds interval, bool tree = false);
  ~memory_sampler();
  memory_sampler(const memory_sampler&) = delete;
  memory_sampler& operator=(const memory_sampler&) = delete;

  /// The largest VmRSS sampled so far, in KiB.
  std::uint64_t peak_kib() const noexcept {
    return peak_kib_.load();
  }

private:
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> peak_kib_{0};
  std::thread thread_;
};

} // namespace troupe::bench
