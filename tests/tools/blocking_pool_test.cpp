// The blocking pool: jobs run off the awaiting thread, a deadline or a cancellation
// ends the wait while the job still runs, and a full queue is refused at once.

#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include "support/event_count.hpp"
#include "support/wait_until.hpp"
#include "troupe/tools/blocking_pool.hpp"

using namespace troupe;
using namespace troupe::tools;
using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;
namespace asio = boost::asio;
using troupe::test::event_count;
using troupe::test::wait_until;

namespace {

// A gate a job blocks on until the test opens it (or a long backstop passes, so that a
// failing test still ends).
class gate {
public:
  void open() {
    opened_.set_value();
  }
  void wait_open() const {
    (void)shared_.wait_for(60s);
  }
  void mark_started() {
    started_.set_value();
  }
  bool started_within(std::chrono::milliseconds limit) {
    return started_future_.wait_for(limit) == std::future_status::ready;
  }

private:
  std::promise<void> opened_;
  std::shared_future<void> shared_ = opened_.get_future().share();
  std::promise<void> started_;
  std::future<void> started_future_ = started_.get_future();
};

// Runs `coroutine` to completion on a fresh io_context on this thread.
template <class T> T run_here(asio::awaitable<T> coroutine) {
  asio::io_context io;
  std::optional<T> out;
  asio::co_spawn(io, std::move(coroutine), [&out](std::exception_ptr ep, T value) {
    if (ep) {
      std::rethrow_exception(ep);
    }
    out = std::move(value);
  });
  io.run();
  return std::move(*out);
}

asio::awaitable<expected<int>> blocked_job(blocking_pool* pool, gate* g,
                                           std::chrono::milliseconds timeout) {
  auto job = [g](const job_control&) {
    g->mark_started();
    g->wait_open();
    return 1;
  };
  co_return co_await pool->run(std::move(job), timeout);
}

asio::awaitable<expected<int>> quick_job(blocking_pool* pool, int value) {
  auto job = [value](const job_control&) { return value; };
  co_return co_await pool->run(std::move(job), 10s);
}

// Completes once `d` has passed: the rival a job's wait is raced against.
asio::awaitable<void> time_passes(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

// A blocked job raced against a short timer: the timer must win at once.
asio::awaitable<std::size_t> abandon_after(blocking_pool* pool, gate* g,
                                           std::chrono::milliseconds after) {
  auto r = co_await (blocked_job(pool, g, 60s) || time_passes(after));
  co_return r.index();
}

// A job that spins until told to stop, raced against a short timer.
asio::awaitable<std::size_t> abandon_spinning(blocking_pool* pool, std::promise<bool>* saw_stop,
                                              std::chrono::milliseconds after) {
  auto job = [saw_stop](const job_control& control) {
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (!control.should_stop() && std::chrono::steady_clock::now() < until) {
      std::this_thread::yield();
    }
    saw_stop->set_value(control.should_stop());
    return 0;
  };
  auto r = co_await (pool->run(std::move(job), 60s) || time_passes(after));
  co_return r.index();
}

} // namespace

TEST_CASE("a job runs on a pool thread, not on the awaiting one", "[tools][blocking_pool]") {
  blocking_pool pool(2);
  const auto here = std::this_thread::get_id();
  auto r = run_here(pool.run([](const job_control&) { return std::this_thread::get_id(); }, 5s));
  REQUIRE(r);
  CHECK(*r != here);
}

TEST_CASE("the deadline fires while a job blocks, and the pool serves the next job",
          "[tools][blocking_pool]") {
  blocking_pool pool(1);
  gate g;
  const auto started = std::chrono::steady_clock::now();
  auto r = run_here(blocked_job(&pool, &g, 200ms));
  const auto waited = std::chrono::steady_clock::now() - started;
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::timeout);
  CHECK_THAT(r.error().message, Catch::Contains("within 200 ms"));
  CHECK(waited >= 200ms);
  CHECK(waited < 2s);
  CHECK(g.started_within(0ms)); // it was running, not queued, when the deadline fired
  g.open();
  auto next = run_here(quick_job(&pool, 7));
  REQUIRE(next);
  CHECK(*next == 7);
}

TEST_CASE("cancelling the awaiting coroutine ends the wait while the job still runs",
          "[tools][blocking_pool]") {
  gate g; // before the pool, so that it outlives the pool's threads
  blocking_pool pool(1);
  const auto started = std::chrono::steady_clock::now();
  CHECK(run_here(abandon_after(&pool, &g, 100ms)) == 1);
  CHECK(std::chrono::steady_clock::now() - started < 2s);
  g.open();
}

TEST_CASE("a job offered to a full pool is refused at once with a busy error",
          "[tools][blocking_pool]") {
  // Declared before the pool, so that they outlive its threads.
  gate running;
  gate queued;
  asio::io_context io;
  event_count answered;
  blocking_pool pool(1, 1);
  const auto count = [&answered](std::exception_ptr, expected<int>) { answered.raise(); };
  asio::co_spawn(io, blocked_job(&pool, &running, 30s), count);
  std::thread io_thread([&io] {
    auto work = asio::make_work_guard(io);
    io.run_for(60s);
  });
  REQUIRE(running.started_within(10s)); // the only worker is taken
  asio::post(io, [&] { asio::co_spawn(io, blocked_job(&pool, &queued, 30s), count); });
  // The second job waits in the queue of one; a third is refused without waiting.
  REQUIRE(wait_until([&] { return pool.queued() >= 1; }, 10s));
  REQUIRE(pool.queued() == 1);
  const auto offered = std::chrono::steady_clock::now();
  auto third = run_here(quick_job(&pool, 3));
  CHECK(std::chrono::steady_clock::now() - offered < 1s);
  REQUIRE_FALSE(third);
  CHECK(third.error().code == errc::limit_exceeded);
  CHECK_THAT(third.error().message, Catch::StartsWith("busy"));
  // Both accepted jobs still run to their end once unblocked.
  running.open();
  queued.open();
  CHECK(answered.wait_for(2, 10s));
  io.stop();
  io_thread.join();
}

TEST_CASE("a job is told to stop once its awaiter has given up", "[tools][blocking_pool]") {
  blocking_pool pool(1);
  std::promise<bool> saw_stop;
  auto told = saw_stop.get_future();
  // The job's own deadline is far; only the awaiter's cancellation can stop it.
  CHECK(run_here(abandon_spinning(&pool, &saw_stop, 100ms)) == 1);
  REQUIRE(told.wait_for(10s) == std::future_status::ready);
  CHECK(told.get());
}

TEST_CASE("destroying the pool wakes the awaiters of queued jobs", "[tools][blocking_pool]") {
  gate running;
  asio::io_context io;
  event_count queued_answered;
  std::optional<expected<int>> queued_result; // written before queued_answered is raised
  auto pool = std::make_unique<blocking_pool>(1, 4);
  asio::co_spawn(io, blocked_job(pool.get(), &running, 30s),
                 [](std::exception_ptr, expected<int>) {});
  asio::co_spawn(io, quick_job(pool.get(), 5), [&](std::exception_ptr, expected<int> r) {
    queued_result = std::move(r);
    queued_answered.raise();
  });
  std::thread io_thread([&io] {
    auto work = asio::make_work_guard(io);
    io.run_for(60s);
  });
  REQUIRE(running.started_within(10s));
  // The quick job is in the queue before the pool goes (else it is refused, not queued).
  REQUIRE(wait_until([&] { return pool->queued() >= 1; }, 10s));
  REQUIRE(pool->queued() == 1);
  // The destructor waits for the running job, but wakes the queued one's awaiter first.
  std::thread destroyer([&pool] { pool.reset(); });
  REQUIRE(queued_answered.wait_for(1, 10s));
  REQUIRE(queued_result.has_value());
  CHECK_FALSE(*queued_result);
  CHECK(queued_result->error().code == errc::cancelled);
  running.open();
  destroyer.join();
  io.stop();
  io_thread.join();
}
