// The sandbox escape suite: each case tries a way out and asserts the specific outcome.

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "support/troupe_process.hpp"
#include "troupe/tools/sandbox.hpp"

using namespace troupe::tools;
using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;
namespace asio = boost::asio;

namespace {

// Every sandboxed process of this test binary carries this variable, so the suite can
// find its own strays even while other suites run sandboxes in parallel.
std::string test_marker() {
  return "troupe-test-" + std::to_string(::getpid());
}

sandbox_result run_in_sandbox(std::vector<std::string> argv, const std::filesystem::path& ws,
                              sandbox_limits limits = {}, sandbox_options options = {}) {
  asio::io_context io;
  sandbox_runner runner(options);
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

sandbox_result bash(const std::string& script, const std::filesystem::path& ws,
                    sandbox_limits limits = {}) {
  return run_in_sandbox({"/usr/bin/bash", "-c", script}, ws, limits);
}

// A zombie whose parent is this test process (re-parented here as the subreaper).
bool is_sandbox_zombie(const std::string& pid) {
  std::ifstream stat_file("/proc/" + pid + "/stat");
  std::string line;
  std::getline(stat_file, line);
  const auto close = line.rfind(')');
  return close != std::string::npos && std::atol(line.c_str() + close + 4) == ::getpid();
}

bool has_limit(const sandbox_result& r, std::string_view prefix) {
  for (const auto& l : r.limits_in_force) {
    if (l.rfind(prefix, 0) == 0) {
      return true;
    }
  }
  return false;
}

// Processes started by this test binary's sandboxes that still exist (zombies
// included: a zombie left for init to reap is a stray too).
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
    std::ifstream stat_file(entry.path() / "stat");
    std::string stat_line;
    std::getline(stat_file, stat_line);
    const bool zombie = stat_line.find(") Z ") != std::string::npos;
    if (environ_text.find(needle) != std::string::npos || (zombie && is_sandbox_zombie(name))) {
      ++count;
    }
  }
  return count;
}

} // namespace

TEST_CASE("sandboxed code runs in the workspace and its output is captured", "[tools][sandbox]") {
  troupe::test::temp_dir ws;
  auto r = bash("echo out; echo err >&2; pwd; echo made > made.txt; exit 3", ws.path());
  CHECK(r.exit_code == 3);
  CHECK(r.sandboxed);
  CHECK(r.stdout_text == "out\n/work\n");
  CHECK(r.stderr_text == "err\n");
  CHECK(std::filesystem::exists(ws.path() / "made.txt"));
  CHECK(has_limit(r, "seccomp"));
  CHECK(has_limit(r, "rlimit_as="));
}

TEST_CASE("the sandbox has no network: loopback services and public addresses are unreachable",
          "[tools][sandbox]") {
  // A host service on loopback that the sandbox must not reach.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(listener, 1) == 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  const auto port = ntohs(addr.sin_port);

  troupe::test::temp_dir ws;
  auto local =
      bash("exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(port) + " && echo CONNECTED", ws.path());
  CHECK(local.exit_code != 0);
  CHECK(local.stdout_text.find("CONNECTED") == std::string::npos);
  // 192.0.2.1 is TEST-NET-1: no route exists inside the sandbox, and no packet leaves.
  auto remote =
      bash("timeout 5 bash -c 'exec 3<>/dev/tcp/192.0.2.1/80' && echo CONNECTED", ws.path());
  CHECK(remote.exit_code != 0);
  CHECK(remote.stdout_text.find("CONNECTED") == std::string::npos);
  CHECK_THAT(remote.stderr_text, Catch::Contains("unreachable"));
  ::close(listener);
}

TEST_CASE("the sandbox cannot read /etc/shadow or /root", "[tools][sandbox]") {
  troupe::test::temp_dir ws;
  auto r = bash("cat /etc/shadow; ls /root; ls /", ws.path());
  CHECK_THAT(r.stderr_text, Catch::Contains("/etc/shadow: No such file or directory"));
  CHECK_THAT(r.stderr_text, Catch::Contains("/root"));
  CHECK(r.stdout_text.find("root:") == std::string::npos);
  // Only what was bound is visible.
  CHECK(r.stdout_text.find("home") == std::string::npos);
  CHECK(r.stdout_text.find("work") != std::string::npos);
}

TEST_CASE("the sandbox cannot write outside its workspace", "[tools][sandbox]") {
  troupe::test::temp_dir ws;
  const auto marker = std::filesystem::temp_directory_path() / "troupe-sandbox-escape-marker";
  std::filesystem::remove(marker);
  auto r = bash("echo x > /usr/escaped; echo x > /etc/escaped; echo x > " + marker.string() +
                    "; echo inside > /tmp/private; cat /tmp/private",
                ws.path());
  CHECK_THAT(r.stderr_text, Catch::Contains("/usr/escaped: Read-only file system"));
  CHECK_FALSE(std::filesystem::exists("/usr/escaped"));
  CHECK_FALSE(std::filesystem::exists("/etc/escaped"));
  // The sandbox's /tmp is private: the host path is untouched.
  CHECK_FALSE(std::filesystem::exists(marker));
  CHECK(r.stdout_text == "inside\n");
}

TEST_CASE("a fork bomb is contained by the process limit", "[tools][sandbox]") {
  troupe::test::temp_dir ws;
  sandbox_limits limits;
  limits.timeout = 5s;
  limits.max_processes = 32;
  // The shell sleeps while the bomb forks: the sleep is the span the pids limit is tested over.
  auto r = bash("bomb() { bomb | bomb & }; bomb; sleep 2; echo survived", ws.path(), limits);
  CHECK(has_limit(r, "cgroup_pids=32"));
  CHECK_THAT(r.stderr_text, Catch::Contains("fork"));
  CHECK(sandbox_processes() == 0);
}

TEST_CASE("a memory bomb fails inside the sandbox, not on the host", "[tools][sandbox]") {
  troupe::test::temp_dir ws;
  sandbox_limits limits;
  limits.memory_mb = 128;
  auto r = run_in_sandbox(
      {"/usr/bin/python3", "-c", "x = bytearray(1024*1024*1024)\nprint('allocated')"}, ws.path(),
      limits);
  CHECK(r.exit_code != 0);
  CHECK(r.stdout_text.find("allocated") == std::string::npos);
  CHECK_THAT(r.stderr_text, Catch::Contains("MemoryError"));
}

TEST_CASE("a CPU spin past the timeout is killed and reported", "[tools][sandbox]") {
  troupe::test::temp_dir ws;
  sandbox_limits limits;
  limits.timeout = 500ms;
  const auto start = std::chrono::steady_clock::now();
  auto r = bash("while :; do :; done", ws.path(), limits);
  CHECK(r.timed_out);
  CHECK(r.exit_code == 124);
  CHECK(std::chrono::steady_clock::now() - start < 4s);
  CHECK(sandbox_processes() == 0);
}

TEST_CASE("50 MB of output is capped with a truncation marker", "[tools][sandbox]") {
  troupe::test::temp_dir ws;
  sandbox_limits limits;
  limits.output_cap_bytes = 10'000;
  auto r = bash("head -c 52428800 /dev/zero | tr '\\0' 'a'; echo done >&2", ws.path(), limits);
  CHECK(r.exit_code == 0);
  CHECK(r.stdout_truncated);
  CHECK(r.stdout_bytes == 52'428'800);
  CHECK(r.stdout_text.size() < 10'200);
  CHECK_THAT(r.stdout_text, Catch::Contains("output truncated; 52418800 more bytes"));
  CHECK(r.stderr_text == "done\n");
}

TEST_CASE("a child that outlives its parent is killed with the sandbox", "[tools][sandbox]") {
  troupe::test::temp_dir ws;
  const auto start = std::chrono::steady_clock::now();
  // A straggler that would write for 300 s: the cleanup must kill it, not wait for it.
  auto r = bash("(sleep 300; echo late > late.txt) & disown; echo parent-done", ws.path());
  CHECK(r.stdout_text == "parent-done\n");
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  CHECK(sandbox_processes() == 0);
  CHECK_FALSE(std::filesystem::exists(ws.path() / "late.txt"));
}

TEST_CASE("a symlink to / in the workspace leads only to the sandbox's own root",
          "[tools][sandbox]") {
  troupe::test::temp_dir ws;
  std::filesystem::create_directory_symlink("/", ws.path() / "hostroot");
  auto r = bash("cat hostroot/etc/shadow; ls hostroot/root; ls hostroot/", ws.path());
  CHECK_THAT(r.stderr_text, Catch::Contains("hostroot/etc/shadow: No such file or directory"));
  CHECK(r.stdout_text.find("home") == std::string::npos);
}

TEST_CASE("namespace and mount system calls are refused by seccomp", "[tools][sandbox]") {
  troupe::test::temp_dir ws;
  auto r = run_in_sandbox({"/usr/bin/python3", "-c",
                           "import ctypes, os\n"
                           "libc = ctypes.CDLL(None, use_errno=True)\n"
                           "print('unshare', libc.unshare(0x10000000), ctypes.get_errno())\n"
                           "print('mount', libc.mount(b'none', b'/tmp', b'tmpfs', 0, None), "
                           "ctypes.get_errno())\n"},
                          ws.path());
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.stdout_text, Catch::Contains("unshare -1 1\n")); // EPERM
  CHECK_THAT(r.stdout_text, Catch::Contains("mount -1 1\n"));
}

TEST_CASE("a missing sandbox fails closed without running anything", "[tools][sandbox]") {
  troupe::test::temp_dir ws;
  sandbox_options options;
  options.bwrap = "/nonexistent/bwrap";
  auto r = run_in_sandbox({"/usr/bin/bash", "-c", "echo ran > ran.txt"}, ws.path(), {}, options);
  CHECK(r.exit_code == 126);
  CHECK(r.sandboxed);
  CHECK_THAT(r.error, Catch::Contains("the code was not run"));
  CHECK_FALSE(std::filesystem::exists(ws.path() / "ran.txt"));
}

TEST_CASE("host execution is an explicit opt-in and says sandboxed false", "[tools][sandbox]") {
  troupe::test::temp_dir ws;
  sandbox_options options;
  options.allow_host = true;
  // An orphaned 300 s sleeper: the run must end without waiting for it.
  auto r = run_in_sandbox({"/usr/bin/bash", "-c", "pwd; (sleep 300 &); echo ok"}, ws.path(), {},
                          options);
  CHECK_FALSE(r.sandboxed);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.stdout_text, Catch::Contains(std::filesystem::canonical(ws.path()).string()));
  CHECK(sandbox_processes() == 0);
}

namespace {

asio::awaitable<void> sleep_a_bit(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

// Races a long sandboxed sleep against a short timer; returns which finished first.
asio::awaitable<std::size_t> run_then_give_up(const sandbox_runner* runner,
                                              sandbox_request request) {
  auto r = co_await (runner->run(std::move(request)) || sleep_a_bit(300ms));
  co_return r.index();
}

} // namespace

TEST_CASE("cancelling a run kills the process tree", "[tools][sandbox]") {
  troupe::test::temp_dir ws;
  asio::io_context io;
  sandbox_runner runner;
  sandbox_request request;
  // Two 300 s sleepers the cancellation must kill at once.
  request.argv = {"/usr/bin/bash", "-c", "sleep 300 & sleep 300"};
  request.workspace = ws.path();
  request.env = {{"TROUPE_TEST_MARKER", test_marker()}};
  std::size_t winner = 99;
  asio::co_spawn(io, run_then_give_up(&runner, request),
                 [&winner](std::exception_ptr, std::size_t w) { winner = w; });
  const auto start = std::chrono::steady_clock::now();
  io.run();
  CHECK(winner == 1);
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  CHECK(sandbox_processes() == 0);
}

TEST_CASE("a finished run leaves no process or zombie behind, sandboxed or on the host",
          "[tools][sandbox]") {
  troupe::test::temp_dir ws;
  // A daemon in its own session outlives its parent unless the run's cleanup kills it.
  // Sleepers in their own session and orphaned: the cleanup must find and kill both.
  const std::string script = "setsid sleep 300 & (sleep 300 &); echo started";
  auto sandboxed = bash(script, ws.path());
  CHECK(sandboxed.stdout_text == "started\n");
  CHECK(sandbox_processes() == 0);
  sandbox_options host;
  host.allow_host = true;
  auto on_host = run_in_sandbox({"/usr/bin/bash", "-c", script}, ws.path(), {}, host);
  CHECK(on_host.stdout_text == "started\n");
  CHECK(sandbox_processes() == 0);
  // That no cgroup is left behind either: tests/tools/may_skip/cgroup_limits_test.cpp.
}

// The sandbox's cgroup namespace, which exists only where the cgroup hierarchy is
// writable: tests/tools/may_skip/cgroup_limits_test.cpp.

TEST_CASE("the program starts with no signal blocked or ignored, whatever troupe's own are",
          "[tools][sandbox]") {
  troupe::test::temp_dir ws;
  // The caller ignores SIGPIPE and blocks SIGUSR1 (servers do such things); neither may
  // reach the sandboxed program, nor may the runner's own blocking around its spawn.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction previous {};
  ::sigaction(SIGPIPE, &ignore, &previous);
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  sigset_t previous_mask;
  ::pthread_sigmask(SIG_BLOCK, &usr1, &previous_mask);
  // glibc's own real-time signals (32, 33) ignored too, as some job-control shells leave
  // them: glibc's sigaction cannot reset those, so the runner must use the system call.
  struct kernel_sigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)();
    unsigned long mask;
  };
  kernel_sigaction glibc_previous[2]{};
  for (int i = 0; i < 2; ++i) {
    kernel_sigaction ignore_raw{SIG_IGN, 0, nullptr, 0};
    ::syscall(SYS_rt_sigaction, 32 + i, &ignore_raw, &glibc_previous[i], sizeof(unsigned long));
  }
  sandbox_options host;
  host.allow_host = true;
  for (const auto& options : {sandbox_options{}, host}) {
    auto r = run_in_sandbox({"/usr/bin/grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"},
                            ws.path(), {}, options);
    CHECK(r.exit_code == 0);
    CHECK(r.stdout_text == "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
  }
  for (int i = 0; i < 2; ++i) {
    ::syscall(SYS_rt_sigaction, 32 + i, &glibc_previous[i], nullptr, sizeof(unsigned long));
  }
  ::pthread_sigmask(SIG_SETMASK, &previous_mask, nullptr);
  ::sigaction(SIGPIPE, &previous, nullptr);
}

TEST_CASE("a program that exits without reading its stdin does not take troupe down",
          "[tools][sandbox]") {
  troupe::test::temp_dir ws;
  sandbox_request request;
  request.argv = {"/usr/bin/true"};
  request.workspace = ws.path();
  request.stdin_data.assign(4 * 1024 * 1024, 'x'); // far more than a pipe holds
  sandbox_options host;
  host.allow_host = true;
  for (const auto& options : {sandbox_options{}, host}) {
    asio::io_context io;
    sandbox_runner runner(options);
    sandbox_result result;
    result.exit_code = -1;
    asio::co_spawn(io, runner.run(request),
                   [&result](std::exception_ptr, sandbox_result r) { result = std::move(r); });
    io.run(); // without protection, SIGPIPE ends this test binary here
    CHECK(result.exit_code == 0);
  }
}

// Whether the sandbox's uid reaches a workspace under a private parent depends on who
// troupe runs as: tests/tools/may_skip/sandbox_reach_test.cpp.

TEST_CASE("the sandbox cannot make a FIFO or a device node", "[tools][sandbox][hostile]") {
  troupe::test::temp_dir ws;
  auto r = bash("mkfifo p; echo fifo=$?; mknod d c 1 5; echo node=$?; "
                "/usr/bin/python3 -c 'import os\ntry:\n os.mkfifo(\"q\")\nexcept OSError as e:\n "
                "print(\"python\", e.errno)'",
                ws.path());
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.stdout_text, Catch::Contains("fifo=1") && Catch::Contains("node=1") &&
                                Catch::Contains("python 1\n"));
  CHECK_THAT(r.stderr_text, Catch::Contains("Operation not permitted"));
  CHECK_FALSE(std::filesystem::exists(ws.path() / "p"));
  CHECK_FALSE(std::filesystem::exists(ws.path() / "q"));
  CHECK_FALSE(std::filesystem::exists(ws.path() / "d"));
}

TEST_CASE("io_uring is refused inside the sandbox", "[tools][sandbox][hostile]") {
  troupe::test::temp_dir ws;
  // io_uring_setup(1, params) through libc's syscall(): 425 on x86_64 and arm64 alike.
  auto r = run_in_sandbox({"/usr/bin/python3", "-c",
                           "import ctypes\n"
                           "libc = ctypes.CDLL(None, use_errno=True)\n"
                           "params = ctypes.create_string_buffer(120)\n"
                           "for nr in (425, 426, 427):\n"
                           "    rc = libc.syscall(nr, 1, params, 0, 0, 0)\n"
                           "    print(nr, rc, ctypes.get_errno())\n"},
                          ws.path());
  CHECK(r.exit_code == 0);
  CHECK(r.stdout_text == "425 -1 1\n426 -1 1\n427 -1 1\n");
}

TEST_CASE("node, bash and python's numpy, pandas and matplotlib still run under the filter",
          "[tools][sandbox][hostile]") {
  troupe::test::temp_dir ws;
  auto py = run_in_sandbox({"/usr/bin/python3", "-c",
                            "import numpy, pandas, matplotlib\n"
                            "matplotlib.use('Agg')\n"
                            "import matplotlib.pyplot as plt\n"
                            "df = pandas.DataFrame({'x': numpy.arange(5)})\n"
                            "plt.plot(df.x, df.x ** 2)\n"
                            "plt.savefig('chart.png')\n"
                            "print(int(df.x.sum()))\n"},
                           ws.path());
  CHECK(py.exit_code == 0);
  CHECK(py.stdout_text == "10\n");
  CHECK(std::filesystem::file_size(ws.path() / "chart.png") > 0);
  sandbox_limits node_limits;
  node_limits.address_space_mb = 2048;
  auto js = run_in_sandbox({"/usr/bin/node", "-e",
                            "const fs = require('fs');"
                            "fs.writeFileSync('n.txt', 'x'.repeat(1000));"
                            "fs.readFile('n.txt', (e, d) => console.log(e ? e.code : d.length));"},
                           ws.path(), node_limits);
  CHECK(js.exit_code == 0);
  CHECK(js.stdout_text == "1000\n");
  auto sh = bash("for i in 1 2 3; do echo $i; done | sort -r | tr '\\n' ' '", ws.path());
  CHECK(sh.stdout_text == "3 2 1 ");
}
