#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <boost/asio/post.hpp>
#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include "support/heap_in_use.hpp"
#include "support/wait_until.hpp"
#include "troupe/actors/shard_scheduler.hpp"

using namespace troupe::actors;
using namespace std::chrono_literals;
using troupe::test::wait_until;

namespace {

using where_atom = caf::atom_constant<caf::atom("where")>;
using child_atom = caf::atom_constant<caf::atom("child")>;
using count_atom = caf::atom_constant<caf::atom("count")>;
using total_atom = caf::atom_constant<caf::atom("total")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using ask_atom = caf::atom_constant<caf::atom("ask")>;
using silent_atom = caf::atom_constant<caf::atom("silent")>;

constexpr std::size_t not_a_shard = 999;

std::size_t here() {
  return shard_set::current().value_or(not_a_shard);
}

// An actor system on `n` shards.
struct sharded_system {
  explicit sharded_system(std::size_t n)
      : system((use_shard_scheduler(config, options(n)), config)) {}
  static shard_options options(std::size_t n) {
    shard_options o;
    o.shards = n;
    return o;
  }
  caf::actor_system_config config;
  caf::actor_system system;
  caf::scoped_actor self{system};

  template <class T, class Handle, class... Ts> T ask(const Handle& who, Ts&&... xs) {
    std::optional<T> out;
    self->request(who, 5s, std::forward<Ts>(xs)...)
        .receive([&](T value) { out = std::move(value); },
                 [&](caf::error& e) { FAIL("request failed: " << to_string(e)); });
    REQUIRE(out.has_value());
    return *out;
  }
};

struct probe_state {
  static inline const char* name = "probe";
};

// Says which shard it runs on; spawns children that say where they run.
caf::behavior probe(homed_actor<probe_state>* self) {
  return {
      [](where_atom) { return here(); },
      [self](child_atom) {
        auto child = self->spawn(probe);
        return self->delegate(child, where_atom::value);
      },
  };
}

struct counter_state {
  std::uint64_t expected = 0;
  bool in_order = true;
};

// Counts numbered messages and checks that they arrive in order.
caf::behavior counter(homed_actor<counter_state>* self) {
  return {
      [self](count_atom, std::uint64_t n) {
        if (n != self->state.expected) {
          self->state.in_order = false;
        }
        self->state.expected = n + 1;
      },
      [self](total_atom) { return std::make_pair(self->state.expected, self->state.in_order); },
  };
}

struct lifetime_state {
  std::shared_ptr<std::atomic<bool>> destroyed;
  ~lifetime_state() {
    if (destroyed) {
      destroyed->store(true);
    }
  }
};

// Takes requests and never answers them, without keeping them.
caf::behavior black_hole(homed_actor<probe_state>*) {
  return {
      [](silent_atom) -> caf::result<int> { return caf::delegated<int>(); },
  };
}

// On `ask`, requests `silent` of `target` with an hour's timeout and waits.
caf::behavior patient_asker(homed_actor<lifetime_state>* self,
                            std::shared_ptr<std::atomic<bool>> destroyed, caf::actor target) {
  self->state.destroyed = std::move(destroyed);
  return {
      [self, target](ask_atom) {
        self->request(target, std::chrono::seconds(3600), silent_atom::value)
            .then([](int) {}, [](caf::error&) {});
      },
  };
}

} // namespace

TEST_CASE("an actor spawned on a shard runs on that shard's thread", "[actors][shards]") {
  sharded_system s(3);
  auto* shards = shards_of(s.system);
  REQUIRE(shards != nullptr);
  CHECK(shards->size() == 3);
  for (std::size_t k = 0; k < 3; ++k) {
    auto p = spawn_on(s.system, k, probe);
    CHECK(s.ask<std::size_t>(p, where_atom::value) == k);
    caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
  }
}

TEST_CASE("an actor spawned by a homed actor lives on its parent's shard", "[actors][shards]") {
  sharded_system s(4);
  for (std::size_t k = 0; k < 4; ++k) {
    auto parent = spawn_on(s.system, k, probe);
    CHECK(s.ask<std::size_t>(parent, child_atom::value) == k);
    caf::anon_send_exit(parent, caf::exit_reason::user_shutdown);
  }
}

TEST_CASE("actors spawned outside any shard are spread over the shards", "[actors][shards]") {
  sharded_system s(2);
  std::array<int, 2> seen{};
  for (int i = 0; i < 8; ++i) {
    auto p = s.system.spawn(probe);
    const auto k = s.ask<std::size_t>(p, where_atom::value);
    REQUIRE(k < 2);
    ++seen[k];
    caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
  }
  CHECK(seen[0] > 0);
  CHECK(seen[1] > 0);
}

TEST_CASE("messages within a shard and across shards arrive complete and in order",
          "[actors][shards]") {
  sharded_system s(2);
  constexpr std::uint64_t n = 20'000;
  for (const std::size_t target_shard : {std::size_t{0}, std::size_t{1}}) {
    auto c = spawn_on(s.system, target_shard, counter);
    // The sender is a homed actor on shard 0: same shard as the first counter, another
    // shard than the second.
    auto sender = spawn_on(s.system, 0, [c](homed_actor<probe_state>* self) -> caf::behavior {
      return {[self, c](tick_atom) {
        for (std::uint64_t i = 0; i < n; ++i) {
          self->send(c, count_atom::value, i);
        }
      }};
    });
    caf::anon_send(sender, tick_atom::value);
    std::pair<std::uint64_t, bool> total{0, false};
    REQUIRE(wait_until(
        [&] {
          total = s.ask<std::pair<std::uint64_t, bool>>(c, total_atom::value);
          return total.first == n;
        },
        10s));
    CHECK(total.second);
    caf::anon_send_exit(c, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(sender, caf::exit_reason::user_shutdown);
  }
}

TEST_CASE("delayed messages, receive timeouts and request timeouts fire on the shard",
          "[actors][shards]") {
  sharded_system s(2);
  auto fired = std::make_shared<std::promise<std::tuple<std::size_t, std::size_t, bool>>>();
  auto hole = spawn_on(s.system, 0, black_hole);
  auto a = spawn_on(s.system, 1, [fired, hole](homed_actor<probe_state>* self) -> caf::behavior {
    auto delayed_on = std::make_shared<std::size_t>(not_a_shard);
    self->delayed_send(self, 20ms, tick_atom::value);
    return {
        [self, delayed_on, fired, hole](tick_atom) {
          *delayed_on = here();
          self->request(hole, 30ms, silent_atom::value)
              .then([](int) {},
                    [self, delayed_on, fired](caf::error& e) {
                      const bool timed_out = e == caf::sec::request_timeout;
                      const auto timeout_on = here();
                      // A receive timeout next.
                      self->become(
                          caf::after(10ms) >> [self, delayed_on, fired, timeout_on, timed_out] {
                            fired->set_value({*delayed_on, timeout_on, timed_out && here() == 1});
                            self->quit();
                          });
                    });
        },
    };
  });
  auto result = fired->get_future();
  REQUIRE(result.wait_for(10s) == std::future_status::ready);
  const auto [delayed_on, timeout_on, timed_out] = result.get();
  CHECK(delayed_on == 1);
  CHECK(timeout_on == 1);
  CHECK(timed_out);
  caf::anon_send_exit(hole, caf::exit_reason::user_shutdown);
}

TEST_CASE("a pending request timeout does not keep an actor alive", "[actors][shards]") {
  sharded_system s(2);
  auto destroyed = std::make_shared<std::atomic<bool>>(false);
  auto hole = spawn_on(s.system, 0, black_hole);
  {
    auto asker = spawn_on(s.system, 1, patient_asker, destroyed, hole);
    caf::anon_send(asker, ask_atom::value);
  } // the last handle to the asker goes; only its hour-long request timeout is left
  // (CAF's own clock holds the actor strongly until the timeout fires, an hour later).
  CHECK(wait_until([&] { return destroyed->load(); }, 10s));
  caf::anon_send_exit(hole, caf::exit_reason::user_shutdown);
}

namespace {

// Sets itself an hour-long deadline, as a run does, then ends at once.
caf::behavior short_lived(homed_actor<probe_state>* self) {
  self->delayed_send(self, std::chrono::hours(1), tick_atom::value);
  self->send(self, silent_atom::value);
  return {
      [self](silent_atom) { self->quit(); },
      [](tick_atom) {},
  };
}

} // namespace

TEST_CASE("an actor that ends takes the delayed messages it sent itself with it",
          "[actors][shards]") {
  sharded_system s(2);
  const auto spawn_some = [&](int n) {
    for (int i = 0; i < n; ++i) {
      spawn_on(s.system, static_cast<std::size_t>(i % 2), short_lived);
    }
    // Every one has ended (CAF's count of running actors is back to this test's own).
    return wait_until([&] { return s.system.registry().running() <= 1; }, 20s);
  };
  REQUIRE(spawn_some(500));
  const auto before = troupe::test::heap_in_use();
  REQUIRE(spawn_some(5000));
  // Before: each ended actor stayed in memory, held by its hour-long deadline message
  // (over 5 MB for these); now the message leaves with the actor's timeouts.
  CHECK(wait_until([&] { return troupe::test::heap_in_use() < before + 1'000'000; }, 10s));
}

TEST_CASE("asio work posted to a shard runs on the thread of that shard's actors",
          "[actors][shards]") {
  sharded_system s(2);
  auto* shards = shards_of(s.system);
  REQUIRE(shards != nullptr);
  for (std::size_t k = 0; k < 2; ++k) {
    auto p = spawn_on(s.system, k, probe);
    std::promise<std::size_t> posted_on;
    boost::asio::post(shards->executor(k), [&posted_on] { posted_on.set_value(here()); });
    CHECK(posted_on.get_future().get() == k);
    CHECK(s.ask<std::size_t>(p, where_atom::value) == k);
    caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
  }
}

TEST_CASE("the key of a conversation maps to one shard, the same every time", "[actors][shards]") {
  sharded_system s(4);
  auto* shards = shards_of(s.system);
  REQUIRE(shards != nullptr);
  const auto k = shards->shard_for("conversation-42");
  CHECK(k < 4);
  CHECK(shards->shard_for("conversation-42") == k);
}

TEST_CASE("a system on shards shuts down with timers pending", "[actors][shards]") {
  auto s = std::make_unique<sharded_system>(2);
  auto p = spawn_on(s->system, 0, [](homed_actor<probe_state>* self) -> caf::behavior {
    self->delayed_send(self, std::chrono::seconds(3600), tick_atom::value);
    return {[](tick_atom) {}, caf::after(std::chrono::seconds(3600)) >> [] {}};
  });
  auto q = spawn_on(s->system, 1, probe);
  CHECK(s->ask<std::size_t>(q, where_atom::value) == 1);
  caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(q, caf::exit_reason::user_shutdown);
  const auto asked = std::chrono::steady_clock::now();
  s.reset(); // returns: shutdown does not wait for the hour-long timers
  CHECK(std::chrono::steady_clock::now() - asked < 10s);
}

namespace {

struct blocker_state {
  static inline const char* name = "blocker";
};

// Holds its shard's thread for `ms` when told to (what a blocking call on a shard does).
caf::behavior blocker(homed_actor<blocker_state>*) {
  return {[](tick_atom, int ms) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < until) {
    }
  }};
}

struct stall_report {
  std::mutex mutex;
  std::vector<std::tuple<std::size_t, std::string, std::chrono::milliseconds>> stalls;
  std::array<std::atomic<int>, 2> probes{};
  std::atomic<double> worst_lag{0};
};

} // namespace

TEST_CASE("each shard's loop-lag probe reports, and a stall names what held the thread",
          "[actors][shards]") {
  auto report = std::make_shared<stall_report>();
  caf::actor_system_config config;
  shard_options options;
  options.shards = 2;
  options.lag_probe_interval = 20ms;
  options.on_lag = [report](std::size_t shard, double lag) {
    report->probes.at(shard).fetch_add(1);
    double seen = report->worst_lag.load();
    while (lag > seen && !report->worst_lag.compare_exchange_weak(seen, lag)) {
    }
  };
  options.stall_warn = 50ms;
  options.on_stall = [report](std::size_t shard, std::string_view what,
                              std::chrono::milliseconds held) {
    const std::lock_guard lock(report->mutex);
    report->stalls.emplace_back(shard, std::string(what), held);
  };
  use_shard_scheduler(config, options);
  caf::actor_system system(config);
  auto stalls_named = [&](std::string_view what) {
    const std::lock_guard lock(report->mutex);
    return std::count_if(report->stalls.begin(), report->stalls.end(),
                         [&](const auto& s) { return std::get<1>(s) == what; });
  };

  CHECK(wait_until([&] { return report->probes[0] >= 3 && report->probes[1] >= 3; }, 10s));

  auto b = spawn_on(system, 1, blocker);
  caf::anon_send(b, tick_atom::value, 300);
  REQUIRE(wait_until([&] { return stalls_named("blocker") > 0; }, 10s));
  {
    const std::lock_guard lock(report->mutex);
    const auto& [shard, what, held] = report->stalls.front();
    CHECK(shard == 1);
    CHECK(held >= 50ms);
  }
  // Work that is not an actor holds the thread: named as an Asio handler.
  auto* shards = shards_of(system);
  REQUIRE(shards != nullptr);
  boost::asio::post(shards->executor(0), [] {
    const auto until = std::chrono::steady_clock::now() + 300ms;
    while (std::chrono::steady_clock::now() < until) {
    }
  });
  REQUIRE(wait_until([&] { return stalls_named("asio handler") > 0; }, 10s));
  // The probe saw the stall as lag.
  CHECK(wait_until([&] { return report->worst_lag.load() >= 0.2; }, 10s));
  caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
}
