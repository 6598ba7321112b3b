// The sandbox's cgroup limits, which hold only where the cgroup v1 hierarchy is writable:
// where it is not, each case is reported as skipped (ctest's SKIP_RETURN_CODE), never as
// passed.

#include <signal.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "support/skip.hpp"
#include "support/troupe_process.hpp"
#include "troupe/tools/sandbox.hpp"

using namespace troupe::tools;
namespace asio = boost::asio;

namespace {

std::string test_marker() {
  return "troupe-test-" + std::to_string(::getpid());
}

sandbox_result run_in_sandbox(std::vector<std::string> argv, const std::filesystem::path& ws,
                              sandbox_limits limits = {}) {
  asio::io_context io;
  sandbox_runner runner;
  sandbox_result result;
  sandbox_request request{std::move(argv), ws, {{"TROUPE_TEST_MARKER", test_marker()}}, {}, limits};
  asio::co_spawn(io, runner.run(std::move(request)),
                 [&result](std::exception_ptr ep, sandbox_result r) {
                   if (ep) {
                     std::rethrow_exception(ep);
                   }
                   result = std::move(r);
                 });
  io.run();
  return result;
}

bool has_limit(const sandbox_result& r, std::string_view prefix) {
  for (const auto& l : r.limits_in_force) {
    if (l.rfind(prefix, 0) == 0) {
      return true;
    }
  }
  return false;
}

// Processes of this test binary's sandboxes that still exist.
int sandbox_processes() {
  const auto needle = "TROUPE_TEST_MARKER=" + test_marker();
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const auto name = entry.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) {
      continue;
    }
    std::ifstream environ_file(entry.path() / "environ");
    std::string environ_text((std::istreambuf_iterator<char>(environ_file)),
                             std::istreambuf_iterator<char>());
    count += environ_text.find(needle) != std::string::npos ? 1 : 0;
  }
  return count;
}

// Skips the case unless the runner puts its runs under the `controller` cgroup here, as
// a trial run shows.
void require_cgroup(const std::string& controller) {
  bool in_force = false;
  {
    troupe::test::temp_dir ws;
    auto trial = run_in_sandbox({"/usr/bin/true"}, ws.path());
    in_force = has_limit(trial, "cgroup_" + controller + "=");
  }
  if (!in_force) {
    troupe::test::skip_test("the " + controller +
                            " cgroup controller is not writable here, so its limit cannot hold");
  }
}

// This process's per-run cgroup directories that still exist (run-<pid>-<n>).
int leftover_cgroups() {
  int count = 0;
  const auto prefix = "run-" + std::to_string(::getpid()) + "-";
  for (const char* controller : {"pids", "memory"}) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(
             std::filesystem::path("/sys/fs/cgroup") / controller / "troupe", ec)) {
      if (entry.path().filename().string().rfind(prefix, 0) == 0) {
        ++count;
      }
    }
  }
  return count;
}

} // namespace

TEST_CASE("the payload runs inside the run's pids cgroup from its first instruction",
          "[tools][sandbox]") {
  require_cgroup("pids");
  troupe::test::temp_dir ws;
  sandbox_limits limits;
  limits.max_processes = 8;
  // Twenty forks; the pids cgroup (which also counts bubblewrap's two processes and the
  // interpreter) lets five succeed. RLIMIT_NPROC (1024) would allow all of them.
  auto r = run_in_sandbox({"/usr/bin/python3", "-c",
                           "import os, time\n"
                           "n = 0\n"
                           "for i in range(20):\n"
                           "    try:\n"
                           "        pid = os.fork()\n"
                           "    except OSError:\n"
                           "        break\n"
                           "    if pid == 0:\n"
                           "        time.sleep(2)\n" // the subject: children hold their pids
                           "        os._exit(0)\n"
                           "    n += 1\n"
                           "print(n)\n"},
                          ws.path(), limits);
  REQUIRE(has_limit(r, "cgroup_pids=8"));
  CHECK(r.exit_code == 0);
  CHECK(r.stdout_text == "5\n");
  CHECK(sandbox_processes() == 0);
}

TEST_CASE("the payload's memory is charged to the run's memory cgroup", "[tools][sandbox]") {
  require_cgroup("memory");
  troupe::test::temp_dir ws;
  sandbox_limits limits;
  limits.memory_mb = 64;
  limits.address_space_mb = 4096; // so that the cgroup, not RLIMIT_AS, is what stops it
  auto r = run_in_sandbox(
      {"/usr/bin/python3", "-c", "b = bytearray(256 * 1024 * 1024)\nprint('allocated')"}, ws.path(),
      limits);
  REQUIRE(has_limit(r, "cgroup_memory=64MiB"));
  CHECK(r.exit_code == 128 + SIGKILL);
  CHECK(r.stdout_text.find("allocated") == std::string::npos);
  CHECK_THAT(r.error, Catch::Contains("memory limit"));
}

TEST_CASE("the sandbox's cgroup namespace is rooted at the run's own cgroup", "[tools][sandbox]") {
  require_cgroup("pids");
  troupe::test::temp_dir ws;
  // Had bubblewrap created its namespaces before the move, the run's cgroup path (and
  // troupe's pid in it) would show here.
  auto r = run_in_sandbox({"/usr/bin/bash", "-c", "cat /proc/self/cgroup"}, ws.path());
  REQUIRE(r.exit_code == 0);
  CHECK(r.stdout_text.find("troupe") == std::string::npos);
  CHECK(r.stdout_text.find("run-") == std::string::npos);
  REQUIRE(has_limit(r, "cgroup_pids="));
  CHECK_THAT(r.stdout_text, Catch::Contains(":pids:/\n"));
  CHECK_THAT(r.stdout_text, Catch::Contains(":memory:/\n"));
}

TEST_CASE("a finished run leaves no cgroup behind", "[tools][sandbox]") {
  require_cgroup("pids");
  troupe::test::temp_dir ws;
  // A daemon in its own session outlives its parent unless the run's cleanup kills it,
  // and its cgroup stays while a process is in it.
  auto r = run_in_sandbox({"/usr/bin/bash", "-c", "setsid sleep 300 & (sleep 300 &); echo started"},
                          ws.path());
  REQUIRE(has_limit(r, "cgroup_pids="));
  CHECK(r.stdout_text == "started\n");
  CHECK(sandbox_processes() == 0);
  CHECK(leftover_cgroups() == 0);
}
