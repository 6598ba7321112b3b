#include <atomic>
#include <future>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <catch2/catch.hpp>

#include "support/heap_in_use.hpp"
#include "support/wait_until.hpp"
#include "troupe/actors/bridge.hpp"

using namespace troupe;
using namespace troupe::actors;
using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;

namespace {

using double_atom = caf::atom_constant<caf::atom("double")>;
using hold_atom = caf::atom_constant<caf::atom("hold")>;
using die_atom = caf::atom_constant<caf::atom("die")>;

// An actor system plus one io thread, torn down in the right order.
struct bridge_fixture {
  bridge_fixture() : system(config) {
    thread = std::thread([this] { io.run(); });
  }
  ~bridge_fixture() {
    work.reset();
    io.stop();
    thread.join();
  }

  // Runs `op` on the io thread and waits for its result.
  template <class T> T run(asio::awaitable<T> op) {
    std::promise<T> result;
    asio::co_spawn(io, std::move(op), [&result](std::exception_ptr ep, T value) {
      if (ep) {
        result.set_exception(ep);
      } else {
        result.set_value(std::move(value));
      }
    });
    return result.get_future().get();
  }

  caf::actor_system_config config;
  caf::actor_system system;
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::thread thread;
};

// Answers `double` at once; takes `hold` requests and never answers them; on `die`
// with a held request, quits without answering.
caf::behavior responder(caf::event_based_actor* self) {
  return {
      [](double_atom, int x) { return x * 2; },
      [self](hold_atom) -> caf::result<int> {
        auto promise = self->make_response_promise<int>();
        return promise;
      },
      [self](die_atom, int) -> caf::result<int> {
        auto promise = self->make_response_promise<int>();
        self->delayed_send(self, 50ms, caf::exit_reason::user_shutdown);
        self->set_default_handler(caf::drop);
        return promise;
      },
  };
}

asio::awaitable<expected<int>> ask_double(caf::actor_system* system, caf::actor who, int x) {
  co_return co_await ask<int>(*system, who, 1s, double_atom::value, x);
}

asio::awaitable<expected<int>> ask_held(caf::actor_system* system, caf::actor who,
                                        std::chrono::milliseconds timeout) {
  co_return co_await ask<int>(*system, who, timeout, hold_atom::value);
}

asio::awaitable<expected<int>> ask_dying(caf::actor_system* system, caf::actor who) {
  co_return co_await ask<int>(*system, who, 10s, die_atom::value, 1);
}

// Completes once `d` has passed: the rival that cancels an ask raced against it.
asio::awaitable<void> time_passes(std::chrono::milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  co_await timer.async_wait(asio::use_awaitable);
}

asio::awaitable<expected<int>> ask_or_give_up(caf::actor_system* system, caf::actor who) {
  auto outcome = co_await (ask<int>(*system, who, 10s, hold_atom::value) || time_passes(50ms));
  if (outcome.index() == 0) {
    co_return std::get<0>(outcome);
  }
  co_return fail(errc::cancelled, "gave up");
}

} // namespace

TEST_CASE("a coroutine asks an actor and resumes with its answer", "[actors][bridge]") {
  bridge_fixture f;
  auto who = f.system.spawn(responder);
  auto answer = f.run(ask_double(&f.system, who, 21));
  REQUIRE(answer);
  CHECK(*answer == 42);
  caf::anon_send_exit(who, caf::exit_reason::user_shutdown);
}

TEST_CASE("an ask that is not answered in time fails with timeout", "[actors][bridge]") {
  bridge_fixture f;
  auto who = f.system.spawn(responder);
  const auto start = std::chrono::steady_clock::now();
  auto answer = f.run(ask_held(&f.system, who, 100ms));
  REQUIRE_FALSE(answer);
  CHECK(answer.error().code == errc::timeout);
  CHECK(std::chrono::steady_clock::now() - start >= 100ms);
  caf::anon_send_exit(who, caf::exit_reason::user_shutdown);
}

TEST_CASE("an ask fails with unavailable as soon as the actor dies mid-request",
          "[actors][bridge]") {
  bridge_fixture f;
  auto who = f.system.spawn(responder);
  const auto start = std::chrono::steady_clock::now();
  auto answer = f.run(ask_dying(&f.system, who));
  REQUIRE_FALSE(answer);
  CHECK(answer.error().code == errc::unavailable);
  // Long before the 10 s timeout: the death itself ended the wait.
  CHECK(std::chrono::steady_clock::now() - start < 5s);
}

TEST_CASE("asking an actor that is already gone fails with unavailable", "[actors][bridge]") {
  bridge_fixture f;
  auto who = f.system.spawn(responder);
  caf::anon_send_exit(who, caf::exit_reason::user_shutdown);
  caf::scoped_actor waiter{f.system};
  waiter->wait_for(who);
  auto answer = f.run(ask_double(&f.system, who, 1));
  REQUIRE_FALSE(answer);
  CHECK(answer.error().code == errc::unavailable);
}

TEST_CASE("a cancelled ask completes at once", "[actors][bridge]") {
  bridge_fixture f;
  auto who = f.system.spawn(responder);
  const auto start = std::chrono::steady_clock::now();
  auto answer = f.run(ask_or_give_up(&f.system, who));
  REQUIRE_FALSE(answer);
  CHECK(answer.error().code == errc::cancelled);
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  caf::anon_send_exit(who, caf::exit_reason::user_shutdown);
}

namespace {

using compute_atom = caf::atom_constant<caf::atom("compute")>;

struct io_observations {
  std::atomic<std::thread::id> coroutine_thread;
  std::atomic<std::thread::id> completion_thread;
  std::atomic<int> completions{0};
};

asio::awaitable<int> triple_on_io(int x, std::shared_ptr<io_observations> seen) {
  seen->coroutine_thread = std::this_thread::get_id();
  asio::steady_timer timer(co_await asio::this_coro::executor, 10ms);
  co_await timer.async_wait(asio::use_awaitable);
  if (x < 0) {
    throw std::runtime_error("negative input");
  }
  co_return x * 3;
}

// On `compute`, runs triple_on_io on the io executor and answers with its result,
// delivered back into the actor as a message.
caf::behavior io_user(caf::event_based_actor* self, asio::any_io_executor io,
                      std::shared_ptr<io_observations> seen) {
  return {
      handle_io_completion(),
      [self, io, seen](compute_atom, int x) -> caf::result<int> {
        auto promise = self->make_response_promise<int>();
        start_io(self, io, triple_on_io(x, seen), [promise, seen](expected<int> r) mutable {
          seen->completion_thread = std::this_thread::get_id();
          seen->completions.fetch_add(1);
          if (r) {
            promise.deliver(*r);
          } else {
            promise.deliver(caf::make_error(caf::sec::runtime_error, r.error().message));
          }
        });
        return promise;
      },
  };
}

// The same as io_user, as a typed actor: its interface lists the io completion.
using typed_io_user_actor =
    caf::typed_actor<caf::replies_to<compute_atom, int>::with<int>, io_completion_handler>;

typed_io_user_actor::behavior_type typed_io_user(typed_io_user_actor::pointer self,
                                                 asio::any_io_executor io,
                                                 std::shared_ptr<io_observations> seen) {
  return {
      handle_io_completion(),
      [self, io, seen](compute_atom, int x) -> caf::result<int> {
        auto promise = self->make_response_promise<int>();
        start_io(self, io, triple_on_io(x, seen), [promise, seen](expected<int> r) mutable {
          seen->completions.fetch_add(1);
          if (r) {
            promise.deliver(*r);
          } else {
            promise.deliver(caf::make_error(caf::sec::runtime_error, r.error().message));
          }
        });
        return promise;
      },
  };
}

} // namespace

TEST_CASE("a typed actor starts a coroutine and handles its result as a message",
          "[actors][bridge]") {
  bridge_fixture f;
  auto seen = std::make_shared<io_observations>();
  auto user = f.system.spawn(typed_io_user, f.io.get_executor(), seen);
  caf::scoped_actor client{f.system};
  int result = 0;
  client->request(user, 5s, compute_atom::value, 5)
      .receive([&](int r) { result = r; },
               [&](caf::error& e) { FAIL("unexpected error " << caf::to_string(e)); });
  CHECK(result == 15);
  CHECK(seen->completions.load() == 1);
  caf::anon_send_exit(user, caf::exit_reason::user_shutdown);
}

TEST_CASE("an actor starts a coroutine and handles its result as a message", "[actors][bridge]") {
  bridge_fixture f;
  auto seen = std::make_shared<io_observations>();
  auto user = f.system.spawn(io_user, f.io.get_executor(), seen);
  caf::scoped_actor client{f.system};
  int result = 0;
  client->request(user, 5s, compute_atom::value, 14)
      .receive([&](int r) { result = r; },
               [&](caf::error& e) { FAIL("unexpected error " << caf::to_string(e)); });
  CHECK(result == 42);
  CHECK(seen->completions.load() == 1);
  // The continuation ran in the actor (a scheduler thread), not on the io thread.
  CHECK(seen->coroutine_thread.load() == f.thread.get_id());
  CHECK(seen->completion_thread.load() != f.thread.get_id());
  caf::anon_send_exit(user, caf::exit_reason::user_shutdown);
}

TEST_CASE("an exception in the coroutine reaches the actor as an error", "[actors][bridge]") {
  bridge_fixture f;
  auto seen = std::make_shared<io_observations>();
  auto user = f.system.spawn(io_user, f.io.get_executor(), seen);
  caf::scoped_actor client{f.system};
  std::string message;
  client->request(user, 5s, compute_atom::value, -1)
      .receive([&](int) { FAIL("expected an error"); },
               [&](caf::error& e) { message = caf::to_string(e); });
  CHECK_THAT(message, Catch::Contains("negative input"));
  caf::anon_send_exit(user, caf::exit_reason::user_shutdown);
}

namespace {

using start_atom = caf::atom_constant<caf::atom("start")>;

asio::awaitable<int> slow_value(std::chrono::milliseconds delay) {
  asio::steady_timer timer(co_await asio::this_coro::executor, delay);
  co_await timer.async_wait(asio::use_awaitable);
  co_return 1;
}

// What the continuation of a dead actor's I/O owns: whether it ran, and a promise kept
// when the last copy of it is destroyed (the completion message was dropped).
struct continuation_probe {
  explicit continuation_probe(std::shared_ptr<std::atomic<bool>> ran_flag)
      : ran(std::move(ran_flag)) {}
  continuation_probe(const continuation_probe&) = delete;
  continuation_probe& operator=(const continuation_probe&) = delete;
  ~continuation_probe() {
    ran.reset(); // before the promise: the test then holds the only flag
    released.set_value();
  }
  std::shared_ptr<std::atomic<bool>> ran;
  std::promise<void> released;
};

// Starts a slow coroutine and quits at once; the completion must be dropped safely.
caf::behavior quitter(caf::event_based_actor* self, asio::any_io_executor io,
                      std::shared_ptr<continuation_probe> probe) {
  return {
      handle_io_completion(),
      [self, io, probe](start_atom) mutable {
        start_io(self, io, slow_value(50ms), [probe](expected<int>) { probe->ran->store(true); });
        probe.reset(); // from here on only the continuation holds it
        self->quit();
      },
  };
}

// Starts a long coroutine and cancels it; reports what the completion said.
caf::behavior canceller(caf::event_based_actor* self, asio::any_io_executor io,
                        std::shared_ptr<std::promise<errc>> outcome) {
  return {
      handle_io_completion(),
      [self, io, outcome](start_atom) {
        auto task = start_io(self, io, slow_value(10s), [outcome](expected<int> r) {
          outcome->set_value(r ? errc::ok : r.error().code);
        });
        task.cancel();
      },
  };
}

} // namespace

TEST_CASE("a completion for an actor that died meanwhile is dropped safely", "[actors][bridge]") {
  bridge_fixture f;
  auto ran = std::make_shared<std::atomic<bool>>(false);
  auto probe = std::make_shared<continuation_probe>(ran);
  auto released = probe->released.get_future();
  auto q = f.system.spawn(quitter, f.io.get_executor(), std::move(probe));
  caf::anon_send(q, start_atom::value);
  // The coroutine ends after 50 ms; its completion finds the actor gone, and nothing
  // keeps the continuation alive: its last copy is destroyed without running.
  REQUIRE(released.wait_for(10s) == std::future_status::ready);
  CHECK_FALSE(ran->load());
  CHECK(ran.use_count() == 1);
}

TEST_CASE("cancelling an io task completes it as cancelled", "[actors][bridge]") {
  bridge_fixture f;
  auto outcome = std::make_shared<std::promise<errc>>();
  auto future = outcome->get_future();
  auto c = f.system.spawn(canceller, f.io.get_executor(), outcome);
  caf::anon_send(c, start_atom::value);
  REQUIRE(future.wait_for(5s) == std::future_status::ready);
  CHECK(future.get() == errc::cancelled);
  caf::anon_send_exit(c, caf::exit_reason::user_shutdown);
}

// Asks `who` to double `times` numbers, one after another; the number of answers.
asio::awaitable<int> ask_many(caf::actor_system* system, caf::actor who, int times) {
  int answered = 0;
  for (int i = 0; i < times; ++i) {
    auto asking = ask<int>(*system, who, 5s, double_atom::value, i);
    auto r = co_await std::move(asking);
    answered += r && *r == 2 * i ? 1 : 0;
  }
  co_return answered;
}

TEST_CASE("an answered ask leaves nothing behind on a long-lived actor", "[actors][bridge]") {
  bridge_fixture f;
  auto r = f.system.spawn(responder);
  // Warm-up: the allocator's caches and the system's own tables settle first.
  REQUIRE(f.run(ask_many(&f.system, r, 2000)) == 2000);
  const auto before = troupe::test::heap_in_use();
  REQUIRE(f.run(ask_many(&f.system, r, 20000)) == 20000);
  // Each ask's helper actor monitored `r`; a monitor left in place kept the helper's
  // memory (some 370 bytes) for as long as `r` lives: 7 MB for these asks. Helpers still
  // finishing on CAF's threads free theirs shortly after their answer.
  const bool settled = troupe::test::wait_until(
      [&] { return troupe::test::heap_in_use() < before + 1'000'000; }, 10s);
  CHECK(settled);
  caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
}
