// The /proc readings of a process tree (a gateway and its helper processes, as OpenClaw runs).

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include <catch2/catch.hpp>

#include "support/wait_until.hpp"
#include "troupe/bench/process_stats.hpp"

using namespace troupe::bench;
using troupe::test::wait_until;
using namespace std::chrono_literals;

namespace {

/// A child process that holds `kib` of touched memory and waits on a pipe until the
/// parent closes it; killed and reaped at scope exit.
class child_holding {
public:
  explicit child_holding(std::size_t kib) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::close(fds[1]);
      auto* block = static_cast<char*>(::malloc(kib * 1024));
      for (std::size_t i = 0; i < kib * 1024; i += 4096) {
        block[i] = 1;
      }
      char c = 0;
      // The parent watches this process's VmRSS grow; then it waits for the pipe to close.
      (void)::read(fds[0], &c, 1);
      ::_exit(block[0] == 1 ? 0 : 1);
    }
    ::close(fds[0]);
    write_end_ = fds[1];
  }
  ~child_holding() {
    ::close(write_end_);
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  pid_t pid() const {
    return pid_;
  }

private:
  pid_t pid_ = -1;
  int write_end_ = -1;
};

} // namespace

TEST_CASE("process_tree lists a process with its children, and sums their memory and CPU",
          "[bench][process_stats]") {
  const pid_t self = ::getpid();
  child_holding child(32 * 1024);
  // The child's memory grows to 32 MiB as it touches its block.
  REQUIRE(wait_until(
      [&] {
        auto m = read_process_memory(child.pid());
        return m && m->rss_kib >= 30 * 1024;
      },
      10s));

  const auto tree = process_tree(self);
  REQUIRE(!tree.empty());
  CHECK(tree.front() == self);
  CHECK(std::find(tree.begin(), tree.end(), child.pid()) != tree.end());
  CHECK(process_tree(child.pid()) == std::vector<pid_t>{child.pid()});

  const auto own = read_process_memory(self);
  const auto sum = read_tree_memory(self);
  REQUIRE(own);
  REQUIRE(sum);
  CHECK(sum->rss_kib >= own->rss_kib + 30 * 1024);
  CHECK(sum->threads >= own->threads + 1);
  const auto cpu = read_tree_cpu(self);
  const auto own_cpu = read_process_cpu(self);
  REQUIRE(cpu);
  REQUIRE(own_cpu);
  CHECK(*cpu >= *own_cpu);
  CHECK(reset_tree_peak_memory(self));

  memory_sampler sampler(self, std::chrono::milliseconds(1), true);
  REQUIRE(wait_until([&] { return sampler.peak_kib() > 0; }, 10s));
  CHECK(sampler.peak_kib() >= own->rss_kib + 30 * 1024);
}

TEST_CASE("the tree readings of a process that is gone are not_found", "[bench][process_stats]") {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(process_tree(pid).empty());
  CHECK_FALSE(read_tree_memory(pid));
  CHECK_FALSE(read_tree_cpu(pid));
}
