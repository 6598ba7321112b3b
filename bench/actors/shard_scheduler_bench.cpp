// The shard scheduler against CAF's work-sharing scheduler: request/response between two
// actors (the shape of run <-> tool_call, conversation <-> run), and a burst of one-way
// messages. Both report process CPU per message, since a hop that wakes another thread
// costs CPU (futex, context switch) that wall time on an idle machine hides.

#include <ctime>
#include <future>
#include <memory>

#include <benchmark/benchmark.h>
#include <caf/all.hpp>

#include "troupe/actors/shard_scheduler.hpp"

using namespace troupe::actors;

/// Fulfilled when the asker has done its rounds.
struct done_signal {
  std::shared_ptr<std::promise<void>> promise;
};

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(done_signal)

namespace {

using ping_atom = caf::atom_constant<caf::atom("ping")>;
using go_atom = caf::atom_constant<caf::atom("go")>;

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

struct empty_state {};

caf::behavior echo(homed_actor<empty_state>*) {
  return {[](ping_atom, int x) { return x + 1; }};
}

// Asks `target` `rounds` times, one request after the other, then fulfils `done`.
caf::behavior asker(homed_actor<empty_state>* self, caf::actor target) {
  return {
      [self, target](go_atom, int rounds, done_signal signal) {
        auto done = signal.promise;
        auto step = std::make_shared<std::function<void(int)>>();
        *step = [self, target, done, step, rounds](int i) {
          if (i == rounds) {
            done->set_value();
            *step = nullptr; // breaks the cycle
            return;
          }
          self->request(target, caf::infinite, ping_atom::value, i).then([step](int next) {
            (*step)(next);
          });
        };
        (*step)(0);
      },
  };
}

enum class scheduler_kind { sharing, shards };

std::unique_ptr<caf::actor_system_config> make_config(scheduler_kind kind) {
  auto cfg = std::make_unique<caf::actor_system_config>();
  if (kind == scheduler_kind::shards) {
    shard_options options;
    options.shards = 2;
    use_shard_scheduler(*cfg, options);
  } else {
    cfg->set("scheduler.policy", caf::atom("sharing"));
    cfg->set("scheduler.max-threads", std::size_t{2});
  }
  return cfg;
}

void request_round_trips(benchmark::State& state, scheduler_kind kind) {
  auto cfg = make_config(kind);
  caf::actor_system system(*cfg);
  // Same shard when sharded (a conversation and its run); the sharing scheduler places
  // them wherever a worker is free.
  auto target = spawn_on(system, 0, echo);
  auto self = spawn_on(system, 0, asker, target);
  constexpr int rounds = 10'000;
  const double cpu0 = process_cpu_seconds();
  std::int64_t messages = 0;
  for (auto _ : state) {
    auto done = std::make_shared<std::promise<void>>();
    auto finished = done->get_future();
    caf::anon_send(self, go_atom::value, rounds, done_signal{done});
    finished.wait();
    messages += 2 * rounds;
  }
  state.counters["process_cpu_ns_per_msg"] =
      (process_cpu_seconds() - cpu0) * 1e9 / static_cast<double>(messages);
  state.SetItemsProcessed(messages);
  caf::anon_send_exit(self, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(target, caf::exit_reason::user_shutdown);
}

void BM_request_round_trips_sharing(benchmark::State& state) {
  request_round_trips(state, scheduler_kind::sharing);
}
void BM_request_round_trips_shards(benchmark::State& state) {
  request_round_trips(state, scheduler_kind::shards);
}

} // namespace

BENCHMARK(BM_request_round_trips_sharing)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_request_round_trips_shards)->UseRealTime()->Unit(benchmark::kMillisecond);
