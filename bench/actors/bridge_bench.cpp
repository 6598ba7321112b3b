// The CAF <-> Asio bridge: a coroutine asking an actor and resuming with the answer
// (`ask`), and an actor starting a coroutine and handling its result (`start_io`).
// Run in full with `make bench`; results in docs/benchmarks.md.

#include <future>
#include <thread>

#include <benchmark/benchmark.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "troupe/actors/bridge.hpp"
#include "troupe/actors/health.hpp"

using namespace troupe;
using namespace troupe::actors;

namespace {

struct bench_system {
  bench_system() {
    config.set("scheduler.policy", caf::atom("sharing"));
    system = std::make_unique<caf::actor_system>(config);
    thread = std::thread([this] { io.run(); });
  }
  ~bench_system() {
    work.reset();
    io.stop();
    thread.join();
  }
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> system;
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::thread thread;
};

asio::awaitable<std::uint64_t> ask_many(caf::actor_system* system, health_actor health,
                                        std::int64_t count) {
  std::uint64_t last = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    auto answer =
        co_await ask<std::uint64_t>(*system, health, std::chrono::seconds(5), ping_atom::value);
    last = answer ? *answer : 0;
  }
  co_return last;
}

// Mean time of one coroutine -> actor -> coroutine round trip.
void BM_bridge_ask_round_trip(benchmark::State& state) {
  bench_system b;
  auto health = spawn_health(*b.system);
  for (auto _ : state) {
    std::promise<std::uint64_t> done;
    asio::co_spawn(b.io, ask_many(b.system.get(), health, state.range(0)),
                   [&done](std::exception_ptr, std::uint64_t v) { done.set_value(v); });
    benchmark::DoNotOptimize(done.get_future().get());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  caf::anon_send_exit(health, caf::exit_reason::user_shutdown);
}

using go_atom = caf::atom_constant<caf::atom("go")>;

asio::awaitable<int> instant(int x) {
  co_return x + 1;
}

// Chains `remaining` start_io round trips inside one actor: actor -> io -> actor.
struct io_chain : std::enable_shared_from_this<io_chain> {
  io_chain(caf::event_based_actor* owner, asio::any_io_executor executor,
           caf::typed_response_promise<int> answer, int count)
      : self(owner), io(std::move(executor)), promise(std::move(answer)), remaining(count) {}

  void step(int done) {
    if (done == remaining) {
      promise.deliver(done);
      return;
    }
    start_io(self, io, instant(done),
             [me = shared_from_this()](expected<int> r) { me->step(r.value_or(0)); });
  }

  caf::event_based_actor* self;
  asio::any_io_executor io;
  caf::typed_response_promise<int> promise;
  int remaining;
};

caf::behavior io_looper(caf::event_based_actor* self, asio::any_io_executor io) {
  return {
      handle_io_completion(),
      [self, io](go_atom, int remaining) -> caf::result<int> {
        auto promise = self->make_response_promise<int>();
        std::make_shared<io_chain>(self, io, promise, remaining)->step(0);
        return promise;
      },
  };
}

void BM_bridge_start_io_round_trip(benchmark::State& state) {
  bench_system b;
  auto looper = b.system->spawn(io_looper, b.io.get_executor());
  caf::scoped_actor client{*b.system};
  for (auto _ : state) {
    client
        ->request(looper, std::chrono::seconds(30), go_atom::value,
                  static_cast<int>(state.range(0)))
        .receive([](int) {}, [&state](caf::error&) { state.SkipWithError("request failed"); });
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  caf::anon_send_exit(looper, caf::exit_reason::user_shutdown);
}

} // namespace

BENCHMARK(BM_bridge_ask_round_trip)->Arg(1000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_bridge_start_io_round_trip)->Arg(1000)->UseRealTime()->Unit(benchmark::kMillisecond);
