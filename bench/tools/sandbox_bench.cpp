// Sandbox start-to-exit overhead for a trivial program (bubblewrap + seccomp + rlimits +
// cgroups, versus the same runner in host mode), and executions per second with 8 in
// parallel. Run in full with `make bench`; results in docs/benchmarks.md.

#include <benchmark/benchmark.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <filesystem>

#include "troupe/tools/sandbox.hpp"

using namespace troupe::tools;
namespace asio = boost::asio;

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
BENCHMARK(BM_sandbox_parallel_8)->UseRealTime()->Unit(benchmark::kMillisecond);
