#include "troupe/bench/process_stats.hpp"

#include <unistd.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace troupe::bench {

namespace {

// "VmRSS:	  123456 kB" -> 123456
std::uint64_t number_after(const std::string& line, std::size_t from) {
  std::uint64_t value = 0;
  std::istringstream in(line.substr(from));
  in >> value;
  return value;
}

} // namespace

expected<process_memory> read_process_memory(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  if (!in) {
    return fail(errc::not_found, fmt::format("process {} is gone", pid));
  }
  process_memory m;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("VmRSS:")) {
      m.rss_kib = number_after(line, 6);
    } else if (line.starts_with("VmHWM:")) {
      m.hwm_kib = number_after(line, 6);
    } else if (line.starts_with("Threads:")) {
      m.threads = number_after(line, 8);
    }
  }
  if (m.rss_kib == 0) {
    return fail(errc::not_found, fmt::format("process {} has no resident memory (a zombie?)", pid));
  }
  return m;
}

bool reset_peak_memory(pid_t pid) {
  std::ofstream out(fmt::format("/proc/{}/clear_refs", pid));
  out << "5\n";
  out.flush();
  return static_cast<bool>(out);
}

expected<std::chrono::microseconds> read_process_cpu(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text;
  if (!in || !std::getline(in, text)) {
    return fail(errc::not_found, fmt::format("process {} is gone", pid));
  }
  // The command name (field 2) is in parentheses and may contain spaces: count fields
  // after the last ')'. utime and stime are fields 14 and 15.
  const auto close = text.rfind(')');
  if (close == std::string::npos) {
    return fail(errc::parse_error, "unexpected /proc/<pid>/stat format");
  }
  std::istringstream fields(text.substr(close + 2));
  std::vector<std::string> f;
  for (std::string s; fields >> s;) {
    f.push_back(s);
  }
  // f[0] is field 3 (state), so field N is f[N - 3].
  if (f.size() < 13) {
    return fail(errc::parse_error, "unexpected /proc/<pid>/stat format");
  }
  const auto ticks = std::stoull(f[11]) + std::stoull(f[12]);
  const auto per_second = static_cast<std::uint64_t>(::sysconf(_SC_CLK_TCK));
  return std::chrono::microseconds(ticks * 1'000'000 / per_second);
}

std::vector<pid_t> process_tree(pid_t pid) {
  std::vector<pid_t> out;
  std::deque<pid_t> queue{pid};
  while (!queue.empty()) {
    const pid_t p = queue.front();
    queue.pop_front();
    std::error_code ec;
    std::filesystem::directory_iterator tasks(fmt::format("/proc/{}/task", p), ec);
    if (ec) {
      continue; // gone
    }
    out.push_back(p);
    for (const auto& task : tasks) {
      std::ifstream in(task.path() / "children");
      for (long child = 0; in >> child;) {
        queue.push_back(static_cast<pid_t>(child));
      }
    }
  }
  return out;
}

expected<process_memory> read_tree_memory(pid_t pid) {
  auto root = read_process_memory(pid);
  if (!root) {
    return root;
  }
  process_memory sum;
  for (const pid_t p : process_tree(pid)) {
    if (auto m = read_process_memory(p); m) {
      sum.rss_kib += m->rss_kib;
      sum.hwm_kib += m->hwm_kib;
      sum.threads += m->threads;
    }
  }
  return sum;
}

bool reset_tree_peak_memory(pid_t pid) {
  bool all = true;
  for (const pid_t p : process_tree(pid)) {
    all = reset_peak_memory(p) && all;
  }
  return all;
}

expected<std::chrono::microseconds> read_tree_cpu(pid_t pid) {
  auto root = read_process_cpu(pid);
  if (!root) {
    return root;
  }
  std::chrono::microseconds sum{0};
  for (const pid_t p : process_tree(pid)) {
    if (auto cpu = read_process_cpu(p); cpu) {
      sum += *cpu;
    }
  }
  return sum;
}

std::uint64_t socket_stats::tcp_mem_kib() const noexcept {
  return tcp_mem_pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)) / 1024;
}

expected<socket_stats> read_socket_stats() {
  std::ifstream in("/proc/net/sockstat");
  if (!in) {
    return fail(errc::unavailable, "cannot read /proc/net/sockstat");
  }
  socket_stats s;
  // "sockets: used 123" and "TCP: inuse 5 orphan 0 tw 3 alloc 9 mem 1"
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    std::string key;
    std::uint64_t value = 0;
    while (words >> key >> value) {
      if (kind == "sockets:" && key == "used") {
        s.sockets_used = value;
      } else if (kind == "TCP:" && key == "inuse") {
        s.tcp_inuse = value;
      } else if (kind == "TCP:" && key == "alloc") {
        s.tcp_alloc = value;
      } else if (kind == "TCP:" && key == "mem") {
        s.tcp_mem_pages = value;
      }
    }
  }
  return s;
}

expected<std::uint64_t> count_process_sockets(pid_t pid) {
  std::error_code ec;
  std::filesystem::directory_iterator it(fmt::format("/proc/{}/fd", pid), ec);
  if (ec) {
    return fail(errc::not_found,
                fmt::format("cannot list the open files of process {}: {}", pid, ec.message()));
  }
  std::uint64_t sockets = 0;
  for (const auto& entry : it) {
    // A descriptor closed between listing and reading is simply not counted.
    const auto target = std::filesystem::read_symlink(entry.path(), ec);
    if (!ec && target.native().starts_with("socket:")) {
      ++sockets;
    }
  }
  return sockets;
}

memory_sampler::memory_sampler(pid_t pid, std::chrono::milliseconds interval, bool tree) {
  thread_ = std::thread([this, pid, interval, tree] {
    while (!stop_.load()) {
      auto m = tree ? read_tree_memory(pid) : read_process_memory(pid);
      if (m && m->rss_kib > peak_kib_.load()) {
        peak_kib_.store(m->rss_kib);
      }
      std::this_thread::sleep_for(interval);
    }
  });
}

memory_sampler::~memory_sampler() {
  stop_.store(true);
  thread_.join();
}

} // namespace troupe::bench
