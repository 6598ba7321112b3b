// Sandbox start-to-exit overhead for a trivial program (bubblewrap + seccomp + rlimits +
// cgroups, versus the same runner in host mode, versus a bare spawn), and executions per
// second with 8 in parallel. Run in full with `make bench`; results in docs/benchmarks.md.

#include <benchmark/benchmark.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "troupe/tools/sandbox.hpp"

extern char** environ;

using namespace troupe::tools;
namespace asio = boost::asio;
using std::chrono::steady_clock;

namespace {

std::filesystem::path bench_workspace() {
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / "troupe-sandbox-bench";
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

asio::awaitable<void> run_n(const sandbox_runner* runner, int count, int* failures) {
  for (int i = 0; i < count; ++i) {
    sandbox_request request;
    request.argv = {"/usr/bin/true"};
    request.workspace = bench_workspace();
    auto r = co_await runner->run(std::move(request));
    if (r.exit_code != 0) {
      ++*failures;
    }
  }
}

// One run through `runner` on a fresh io_context; milliseconds from call to result.
double timed_run(const sandbox_runner& runner, int* failures) {
  const auto start = steady_clock::now();
  asio::io_context io;
  asio::co_spawn(io, run_n(&runner, 1, failures), asio::detached);
  io.run();
  return std::chrono::duration<double, std::milli>(steady_clock::now() - start).count();
}

// posix_spawn + waitpid of /usr/bin/true with no runner at all: the floor.
double timed_bare_spawn(int* failures) {
  const auto start = steady_clock::now();
  char arg0[] = "/usr/bin/true";
  char* argv[] = {arg0, nullptr};
  pid_t pid = 0;
  int status = 0;
  if (::posix_spawn(&pid, arg0, nullptr, nullptr, argv, environ) != 0 ||
      ::waitpid(pid, &status, 0) != pid || status != 0) {
    ++*failures;
  }
  return std::chrono::duration<double, std::milli>(steady_clock::now() - start).count();
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  const auto at = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[at];
}

// One execution at a time; real time per execution. Arg 1: sandboxed, 0: host mode.
void BM_sandbox_trivial_program(benchmark::State& state) {
  sandbox_options options;
  options.allow_host = state.range(0) == 0;
  const sandbox_runner runner(options);
  int failures = 0;
  for (auto _ : state) {
    asio::io_context io;
    asio::co_spawn(io, run_n(&runner, 1, &failures), asio::detached);
    io.run();
  }
  if (failures > 0) {
    state.SkipWithError("a trivial program failed");
  }
  state.SetLabel(options.allow_host ? "host" : "sandboxed");
}

// The issue 7 figure. Each iteration runs /usr/bin/true three ways — through the runner
// sandboxed, through the runner in host mode, and as a bare posix_spawn — so that the
// machine's load hits all three alike; the counters are percentiles over the individual
// runs (ms); `added_p50` is the median of the per-iteration differences sandboxed − host
// and `over_spawn_p50` that of sandboxed − bare spawn (the issue's "over running it
// unsandboxed"). Each run starts after a quiet gap (below), as an agent's tool calls do: run back
// to back, one run's kernel work (an RCU grace period started by a cgroup move, the
// namespace teardown) would overlap or pre-pay the next one's. Arg 0: one runner per
// mode, reused (what a long-lived caller sees); arg 1: a new runner for every run.
void BM_sandbox_start_to_exit(benchmark::State& state) {
  const bool fresh = state.range(0) == 1;
  sandbox_options host_options;
  host_options.allow_host = true;
  auto sandboxed = std::make_unique<sandbox_runner>();
  auto host = std::make_unique<sandbox_runner>(host_options);
  std::vector<double> sandbox_ms;
  std::vector<double> host_ms;
  std::vector<double> spawn_ms;
  std::vector<double> added_ms;
  std::vector<double> over_spawn_ms;
  int failures = 0;
  constexpr auto quiet_gap = std::chrono::milliseconds(25);
  for (auto _ : state) {
    if (fresh) {
      sandboxed = std::make_unique<sandbox_runner>();
      host = std::make_unique<sandbox_runner>(host_options);
    }
    std::this_thread::sleep_for(quiet_gap);
    const auto s = timed_run(*sandboxed, &failures);
    std::this_thread::sleep_for(quiet_gap);
    const auto h = timed_run(*host, &failures);
    std::this_thread::sleep_for(quiet_gap);
    const auto b = timed_bare_spawn(&failures);
    sandbox_ms.push_back(s);
    host_ms.push_back(h);
    spawn_ms.push_back(b);
    added_ms.push_back(s - h);
    over_spawn_ms.push_back(s - b);
  }
  if (failures > 0) {
    state.SkipWithError("a trivial program failed");
  }
  state.counters["sandboxed_p50"] = percentile(sandbox_ms, 0.5);
  state.counters["sandboxed_p90"] = percentile(sandbox_ms, 0.9);
  state.counters["host_p50"] = percentile(host_ms, 0.5);
  state.counters["spawn_p50"] = percentile(spawn_ms, 0.5);
  state.counters["added_p50"] = percentile(added_ms, 0.5);
  state.counters["added_p90"] = percentile(added_ms, 0.9);
  state.counters["over_spawn_p50"] = percentile(over_spawn_ms, 0.5);
  state.SetLabel(fresh ? "new runner per run" : "runner reused");
}

// The cost of starting a sandbox from a caller with a large resident heap, as a troupe
// server has (Arg: MiB resident). Counters: the run's start-to-exit, and the time the
// caller then takes to write one byte in each page of its heap (with fork() every page
// is copy-on-write until the child execs, and stays write-protected after, so this
// write faults on every page; with vfork semantics it does not).
void BM_sandbox_large_caller(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0)) << 20;
  std::vector<char> heap(bytes, 1);
  const sandbox_runner runner;
  std::vector<double> run_ms;
  std::vector<double> touch_ms;
  int failures = 0;
  for (auto _ : state) {
    run_ms.push_back(timed_run(runner, &failures));
    const auto start = steady_clock::now();
    for (std::size_t at = 0; at < heap.size(); at += 4096) {
      heap[at] = static_cast<char>(heap[at] + 1);
    }
    benchmark::DoNotOptimize(heap.data());
    touch_ms.push_back(
        std::chrono::duration<double, std::milli>(steady_clock::now() - start).count());
  }
  if (failures > 0) {
    state.SkipWithError("a trivial program failed");
  }
  state.counters["run_p50"] = percentile(run_ms, 0.5);
  state.counters["heap_write_p50"] = percentile(touch_ms, 0.5);
}

// 8 executions in flight at once on one io thread; items/s = executions per second.
void BM_sandbox_parallel_8(benchmark::State& state) {
  const sandbox_runner runner;
  int failures = 0;
  constexpr int per_lane = 4;
  for (auto _ : state) {
    asio::io_context io;
    for (int lane = 0; lane < 8; ++lane) {
      asio::co_spawn(io, run_n(&runner, per_lane, &failures), asio::detached);
    }
    io.run();
  }
  if (failures > 0) {
    state.SkipWithError("a trivial program failed");
  }
  state.SetItemsProcessed(state.iterations() * 8 * per_lane);
}

} // namespace

BENCHMARK(BM_sandbox_trivial_program)->Arg(1)->Arg(0)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_sandbox_start_to_exit)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_sandbox_large_caller)->Arg(256)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_sandbox_parallel_8)->UseRealTime()->Unit(benchmark::kMillisecond);
