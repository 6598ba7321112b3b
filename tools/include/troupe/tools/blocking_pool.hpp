#pragma once

/// \file
/// A small pool of threads for work that may block (file system walks, reads, pattern
/// search), so that it never runs on the threads that serve requests. The queue is
/// bounded: a job offered to a full pool is refused at once with a "busy" error. Each job
/// is awaited from an Asio coroutine with a deadline and the awaiting coroutine's
/// cancellation: either ends the wait at once, even while the job is still running on
/// its thread (the job is then told to stop and its result is dropped). Jobs must bound
/// their own running time (size caps, linear-time algorithms, and `job_control`).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>
#include <fmt/format.h>

#include "troupe/runtime/error.hpp"

namespace troupe::tools {

/// What a running job may ask: whether its awaiter has given up or its deadline passed.
/// Long jobs check it between steps and return early.
class job_control {
public:
  job_control(const std::atomic<bool>& abandoned, std::chrono::steady_clock::time_point deadline)
      : abandoned_(abandoned), deadline_(deadline) {}
  /// True once nobody waits for the result any more (timeout, cancellation, shutdown).
  bool should_stop() const noexcept {
    return abandoned_.load(std::memory_order_relaxed) ||
           std::chrono::steady_clock::now() >= deadline_;
  }
  std::chrono::steady_clock::time_point deadline() const noexcept {
    return deadline_;
  }

private:
  const std::atomic<bool>& abandoned_;
  std::chrono::steady_clock::time_point deadline_;
};

namespace detail {

/// A queued job, type-erased: what the pool's threads run.
struct pool_job {
  virtual ~pool_job() = default;
  /// Runs the job on a pool thread, then wakes its awaiter.
  virtual void execute() = 0;
  /// Wakes the awaiter with `ec` without running the job (the pool is shutting down).
  virtual void drop(boost::system::error_code ec) = 0;
};

} // namespace detail

/// The pool. Thread-safe; destroying it refuses new jobs, wakes the awaiters of queued
/// ones with an error and joins the threads (running jobs finish first).
class blocking_pool {
public:
  /// `threads` workers (at least 1); at most `max_queued` jobs wait for a worker (0: 16
  /// per thread).
  explicit blocking_pool(std::size_t threads = default_threads, std::size_t max_queued = 0);
  ~blocking_pool();
  blocking_pool(const blocking_pool&) = delete;
  blocking_pool& operator=(const blocking_pool&) = delete;

  /// The default size (the `blocking.threads` setting's default).
  static constexpr std::size_t default_threads = 4;

  /// A process-wide pool of the default size, for callers not given one (tests, the
  /// one-shot chat command). Created at first use.
  static std::shared_ptr<blocking_pool> shared_default();

  std::size_t threads() const noexcept {
    return workers_.size();
  }
  std::size_t max_queued() const noexcept {
    return max_queued_;
  }
  /// Jobs waiting for a worker now.
  std::size_t queued() const;
  /// Jobs running now.
  std::size_t running() const noexcept {
    return running_.load();
  }

  /// Runs `job(control)` on a worker and waits for its result, at most `timeout`. Fails
  /// with limit_exceeded when the queue is full ("busy"), timeout when the deadline
  /// passes first, cancelled when the awaiting coroutine is cancelled or the pool shuts
  /// down. Coroutine parameters by value: the job and its captures are owned by the pool
  /// until it ran.
  template <class Job>
  boost::asio::awaitable<expected<std::invoke_result_t<Job&, const job_control&>>>
  run(Job job, std::chrono::steady_clock::duration timeout);

private:
  template <class T, class Job> struct job_state;

  /// Queues `job`; false when the queue is full or the pool is stopping.
  bool submit(std::shared_ptr<detail::pool_job> job);
  void work();

  std::size_t max_queued_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<detail::pool_job>> queue_;
  bool stopping_ = false;
  std::atomic<std::size_t> running_{0};
  std::vector<std::thread> workers_;
};

/// The job and, once it ran, its result; shared by the pool thread and the awaiter.
template <class T, class Job> struct blocking_pool::job_state final : detail::pool_job {
  job_state(Job j, std::chrono::steady_clock::time_point d) : job(std::move(j)), deadline(d) {}

  Job job;
  std::chrono::steady_clock::time_point deadline;
  std::atomic<bool> abandoned{false};
  std::optional<T> value;
  /// Set when the job threw: what it said.
  std::optional<std::string> failure;
  /// Wakes the awaiter once (whoever of the job, the cancellation or the shutdown comes
  /// first); set by the awaiting operation before the job is queued.
  std::function<void(boost::system::error_code)> wake;
  std::atomic<bool> woken{false};

  void finish(boost::system::error_code ec) {
    if (!woken.exchange(true)) {
      wake(ec);
    }
  }
  void execute() override {
    if (!abandoned.load()) {
      job_control control(abandoned, deadline);
      try {
        value.emplace(job(control));
      } catch (const std::exception& e) {
        failure = e.what();
      } catch (...) {
        failure = "unknown exception";
      }
    }
    finish({});
  }
  void drop(boost::system::error_code ec) override {
    abandoned = true;
    finish(ec);
  }
};

template <class Job>
boost::asio::awaitable<expected<std::invoke_result_t<Job&, const job_control&>>>
blocking_pool::run(Job job, std::chrono::steady_clock::duration timeout) {
  namespace asio = boost::asio;
  using namespace asio::experimental::awaitable_operators;
  using T = std::invoke_result_t<Job&, const job_control&>;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto state = std::make_shared<job_state<T, Job>>(std::move(job), deadline);
  bool accepted = true;

  // Completes when the job has run (or was dropped), or at once on cancellation.
  auto wait_for_job = [this, state, &accepted](auto handler) {
    auto executor = asio::get_associated_executor(handler);
    auto slot = asio::get_associated_cancellation_slot(handler);
    // The handler is shared by the three ways to wake it; `woken` lets one through.
    struct waiter {
      decltype(handler) h;
      asio::executor_work_guard<decltype(executor)> work;
    };
    auto w = std::make_shared<waiter>(waiter{std::move(handler), asio::make_work_guard(executor)});
    const bool has_slot = slot.is_connected();
    // Runs the handler on its own executor, never on the waking thread.
    state->wake = [w, slot, has_slot](boost::system::error_code ec) mutable {
      auto ex = w->work.get_executor();
      asio::post(ex, [w, slot, has_slot, ec]() mutable {
        if (has_slot) {
          slot.clear();
        }
        auto h = std::move(w->h);
        w->work.reset();
        std::move(h)(ec);
      });
    };
    if (has_slot) {
      slot.assign([weak = std::weak_ptr<job_state<T, Job>>(state)](asio::cancellation_type) {
        if (auto s = weak.lock()) {
          s->abandoned = true;
          s->finish(asio::error::operation_aborted);
        }
      });
    }
    if (!submit(state)) {
      accepted = false;
      state->abandoned = true;
      state->finish(asio::error::operation_aborted);
    }
  };
  auto sleep = [](std::chrono::steady_clock::time_point until) -> asio::awaitable<void> {
    asio::steady_timer timer(co_await asio::this_coro::executor, until);
    boost::system::error_code ignored;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  };
  auto waited =
      [](decltype(wait_for_job) initiation) -> asio::awaitable<boost::system::error_code> {
    auto token = asio::as_tuple(asio::use_awaitable);
    auto [ec] = co_await asio::async_initiate<decltype(token), void(boost::system::error_code)>(
        std::move(initiation), token);
    co_return ec;
  };
  auto outcome = co_await (waited(std::move(wait_for_job)) || sleep(deadline));
  if (!accepted) {
    co_return fail(errc::limit_exceeded,
                   fmt::format("busy: all {} blocking-work threads are in use and {} jobs wait; "
                               "try again shortly",
                               threads(), max_queued_));
  }
  if (outcome.index() == 1) {
    state->abandoned = true;
    co_return fail(
        errc::timeout,
        fmt::format("did not finish within {} ms and was stopped",
                    std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()));
  }
  const auto ec = std::get<0>(outcome);
  if (!ec && state->failure) {
    co_return fail(errc::internal, "the work failed: " + *state->failure);
  }
  if (ec || !state->value) {
    state->abandoned = true;
    co_return fail(errc::cancelled, "the call was cancelled before its work finished");
  }
  co_return std::move(*state->value);
}

} // namespace troupe::tools
