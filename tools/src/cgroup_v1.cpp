#include "cgroup_v1.hpp"

#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

namespace troupe::tools::detail {

namespace {

bool write_file(const std::filesystem::path& path, const std::string& value) {
  std::ofstream out(path);
  out << value;
  out.flush();
  return static_cast<bool>(out);
}

std::vector<pid_t> read_pids(const std::filesystem::path& procs) {
  std::vector<pid_t> pids;
  std::ifstream in(procs);
  pid_t pid = 0;
  while (in >> pid) {
    pids.push_back(pid);
  }
  return pids;
}

// Creates root/controller/troupe/name; empty path when not possible.
std::filesystem::path make_group(const std::filesystem::path& root, const char* controller,
                                 const std::string& name) {
  const auto base = root / controller;
  std::error_code ec;
  if (!std::filesystem::exists(base / "cgroup.procs", ec)) {
    return {};
  }
  const auto dir = base / "troupe" / name;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::exists(dir / "cgroup.procs", ec)) {
    return {};
  }
  return dir;
}

} // namespace

cgroup_v1::cgroup_v1(const std::filesystem::path& root, const std::string& name)
    : pids_dir_(make_group(root, "pids", name)), memory_dir_(make_group(root, "memory", name)) {}

cgroup_v1::~cgroup_v1() {
  // Normally empty by now (the runner waits for the tree's exit); otherwise kill what is
  // left and give it a bounded time to leave, so that the directories can be removed.
  for (int round = 0; round < 200 && kill_pass() > 0; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (const auto& dir : {pids_dir_, memory_dir_}) {
    if (!dir.empty()) {
      std::error_code ignored;
      std::filesystem::remove(dir, ignored); // rmdir; fails harmlessly if not yet empty
    }
  }
}

bool cgroup_v1::limit_pids(unsigned max_pids) {
  if (pids_dir_.empty() || !write_file(pids_dir_ / "pids.max", std::to_string(max_pids))) {
    return false;
  }
  tasks_files_.push_back((pids_dir_ / "tasks").string());
  return true;
}

bool cgroup_v1::limit_memory(std::size_t bytes) {
  if (memory_dir_.empty() ||
      !write_file(memory_dir_ / "memory.limit_in_bytes", std::to_string(bytes))) {
    return false;
  }
  // Without swap accounting memsw is absent; the plain limit still holds.
  write_file(memory_dir_ / "memory.memsw.limit_in_bytes", std::to_string(bytes));
  tasks_files_.push_back((memory_dir_ / "tasks").string());
  return true;
}

std::size_t cgroup_v1::kill_pass() {
  std::size_t found = 0;
  for (const auto& dir : {pids_dir_, memory_dir_}) {
    if (dir.empty()) {
      continue;
    }
    for (const auto pid : read_pids(dir / "cgroup.procs")) {
      ::kill(pid, SIGKILL);
      ++found;
    }
  }
  return found;
}

bool cgroup_v1::oom_killed() const {
  if (memory_dir_.empty()) {
    return false;
  }
  // memory.oom_control counts OOM kills ("oom_kill N", Linux 4.13+); failcnt counts hits
  // of the limit, but recent kernels leave it at 0 for v1 groups.
  std::ifstream control(memory_dir_ / "memory.oom_control");
  std::string key;
  unsigned long value = 0;
  while (control >> key >> value) {
    if (key == "oom_kill" && value > 0) {
      return true;
    }
  }
  std::ifstream failcnt(memory_dir_ / "memory.failcnt");
  unsigned long count = 0;
  failcnt >> count;
  return count > 0;
}

} // namespace troupe::tools::detail
