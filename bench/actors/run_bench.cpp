// The run core's overhead: a run of one tool round and one final round against an instant
// mock-llm on loopback, next to the same two provider calls made directly (the
// difference is what the actors, the harness and the bridge cost); and many runs at once.
// Run in full with `make bench`; results in docs/benchmarks.md ("Run core (issue 5)").

#include <sys/resource.h>

#include <cstdlib>
#include <future>
#include <thread>

#include <benchmark/benchmark.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "troupe/actors/run.hpp"
#include "troupe/mock/mock_llm_server.hpp"

using namespace troupe;
using namespace troupe::actors;

namespace {

/// CPU time (user + system) of the whole process so far, in microseconds: every thread
/// (actors, io, the in-process mock) counts, so the difference between two benchmarks
/// on the same setup is what the extra work costs, little disturbed by other load.
double process_cpu_us() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  const auto us = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec);
  };
  return us(u.ru_utime) + us(u.ru_stime);
}

/// Reports the process CPU per iteration since `start`.
void report_process_cpu(benchmark::State& state, double start) {
  state.counters["process_cpu_us"] =
      benchmark::Counter(process_cpu_us() - start, benchmark::Counter::kAvgIterations);
}

/// A concurrency-safe tool that answers at once.
class noop_tool final : public tools::tool {
public:
  noop_tool() {
    descriptor_.name = "noop";
    descriptor_.description = "Does nothing.";
    descriptor_.concurrency_safe = true;
  }
  const tools::tool_descriptor& descriptor() const noexcept override {
    return descriptor_;
  }
  boost::asio::awaitable<tools::tool_result> invoke(std::string,
                                                    tools::tool_context) const override {
    co_return tools::tool_result{true, R"({"ok":true})", {}, {}};
  }

private:
  tools::tool_descriptor descriptor_;
};

struct bench_world {
  bench_world() {
    mock::mock_llm_options options;
    options.rules = *mock::parse_mock_script(R"([
      {"match":{"has_tool_result":false},"reply":{"tool_calls":[{"name":"noop","arguments":{}}]}},
      {"match":{"has_tool_result":true},"reply":{"text":"All done."}}])");
    mock = std::make_unique<mock::mock_llm_server>(mock_io, std::move(options));
    port = mock->listen({"127.0.0.1", 0})->port;
    mock->start();
    mock_thread = std::thread([this] { mock_io.run(); });
    config.set("scheduler.policy", caf::atom("sharing"));
    if (const char* threads = std::getenv("TROUPE_BENCH_CAF_THREADS")) {
      config.set("scheduler.max-threads", static_cast<size_t>(std::atoi(threads)));
    }
    system = std::make_unique<caf::actor_system>(config);
    http = std::make_unique<net::http_client>(io.get_executor());
    auto r = std::make_shared<tools::tool_registry>();
    (void)r->add(std::make_shared<noop_tool>());
    registry = r;
    io_thread = std::thread([this] { io.run(); });
  }
  ~bench_world() {
    system.reset();
    std::promise<void> gone;
    boost::asio::post(io, [this, &gone] {
      http.reset();
      gone.set_value();
    });
    gone.get_future().wait();
    work.reset();
    io.stop();
    io_thread.join();
    boost::asio::post(
        mock_io, [this] { mock->stop(std::chrono::milliseconds(10), [this] { mock_io.stop(); }); });
    mock_thread.join();
  }

  net::provider_config provider() const {
    net::provider_config p;
    p.base_url = "http://127.0.0.1:" + std::to_string(port) + "/v1";
    p.api_key = "k";
    p.retry.max_attempts = 1;
    return p;
  }

  run_spec spec(int n) {
    run_spec s;
    s.run_id = "bench-" + std::to_string(n);
    s.turn_id = s.run_id;
    s.agent.name = "bench";
    s.agent.model = "m";
    s.agent.tools = {"noop"};
    s.provider = provider();
    s.objective = "go";
    s.io.http = http.get();
    s.io.tools = registry;
    return s;
  }

  boost::asio::io_context mock_io;
  std::unique_ptr<mock::mock_llm_server> mock;
  std::uint16_t port = 0;
  std::thread mock_thread;
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> system;
  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
  std::unique_ptr<net::http_client> http;
  std::shared_ptr<const tools::tool_registry> registry;
  std::thread io_thread;
};

/// One run: an LLM round with a tool call, the tool round, and the final LLM round.
void BM_run_tool_round_and_final(benchmark::State& state) {
  bench_world w;
  caf::scoped_actor self{*w.system};
  int n = 0;
  const double cpu_start = process_cpu_us();
  for (auto _ : state) {
    auto run = spawn_run(*w.system, w.spec(++n), run_event_sink{});
    bool ok = false;
    self->request(run, std::chrono::seconds(30), run_atom::value)
        .receive([&](run_result& r) { ok = r.status == storage::run_status::succeeded; },
                 [](caf::error&) {});
    if (!ok) {
      state.SkipWithError("the run failed");
      break;
    }
  }
  report_process_cpu(state, cpu_start);
  state.counters["llm_calls_per_run"] = 2;
}
BENCHMARK(BM_run_tool_round_and_final)->UseRealTime()->Unit(benchmark::kMicrosecond);

boost::asio::awaitable<bool> two_calls(net::http_client* http, net::provider_config config) {
  net::provider_client client(*http, std::move(config));
  completion_request first;
  first.model = "m";
  first.messages.push_back({chat_role::user, "go", {}, "", ""});
  first.tools.push_back({"noop", "Does nothing.", R"({"type":"object","properties":{}})"});
  auto a = co_await client.complete(first);
  completion_request second = first;
  second.messages.push_back({chat_role::assistant, "", a.answer.tool_calls, "", ""});
  for (const auto& c : a.answer.tool_calls) {
    second.messages.push_back({chat_role::tool, R"({"ok":true})", {}, c.id, c.name});
  }
  auto b = co_await client.complete(second);
  co_return a.ok() && b.ok() && !b.answer.text.empty();
}

/// The same two provider calls without actors, harness or tools: the model's share.
void BM_two_provider_calls_alone(benchmark::State& state) {
  bench_world w;
  const double cpu_start = process_cpu_us();
  for (auto _ : state) {
    std::promise<bool> done;
    boost::asio::co_spawn(w.io, two_calls(w.http.get(), w.provider()),
                          [&done](std::exception_ptr e, bool ok) { done.set_value(!e && ok); });
    if (!done.get_future().get()) {
      state.SkipWithError("the calls failed");
      break;
    }
  }
  report_process_cpu(state, cpu_start);
}
BENCHMARK(BM_two_provider_calls_alone)->UseRealTime()->Unit(benchmark::kMicrosecond);

/// N runs at once, each with a tool round and a final round; all must succeed.
void BM_concurrent_runs(benchmark::State& state) {
  bench_world w;
  const auto count = static_cast<int>(state.range(0));
  caf::scoped_actor self{*w.system};
  int n = 0;
  std::int64_t failed = 0;
  for (auto _ : state) {
    for (int i = 0; i < count; ++i) {
      auto run = spawn_run(*w.system, w.spec(++n), run_event_sink{});
      self->send(run, run_atom::value);
    }
    for (int i = 0; i < count; ++i) {
      self->receive(
          [&](run_result& r) { failed += r.status == storage::run_status::succeeded ? 0 : 1; },
          caf::after(std::chrono::seconds(120)) >> [&] { ++failed; });
    }
  }
  state.counters["failed"] = static_cast<double>(failed);
  state.counters["runs_per_s"] =
      benchmark::Counter(static_cast<double>(count) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_concurrent_runs)
    ->Arg(100)
    ->Arg(1000)
    ->Arg(10000)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

} // namespace
