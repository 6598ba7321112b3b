#include "troupe/bench/load_generator.hpp"

#include <cstdio>
#include <memory>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

namespace troupe::bench {

namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;

double load_result::achieved_rate() const noexcept {
  const double seconds = std::chrono::duration<double>(elapsed).count();
  return seconds > 0 ? static_cast<double>(succeeded + failed) / seconds : 0.0;
}

std::string error_kind(const error& e) {
  return std::string(to_string(e.code));
}

namespace {

// Shared by the coroutines of one run, all on one thread.
struct run_state {
  load_options options;
  const workload_fn* work = nullptr;
  net::http_client* client = nullptr;
  load_result result;
  // This second's latencies, for the progress line.
  latency_histogram window;
  std::uint64_t window_failed = 0;
  std::size_t in_flight = 0;
  bool sending = true;
  clock_type::time_point started;
  clock_type::time_point last_done;
  // Ticks the progress line; cancelled when the run is over.
  asio::steady_timer* ticker = nullptr;
};

void finish_if_done(run_state& s) {
  if (!s.sending && s.in_flight == 0 && s.ticker) {
    s.ticker->cancel();
  }
}

void count_outcome(run_state& s, const std::optional<std::string>& failure,
                   clock_type::time_point from) {
  const auto now = clock_type::now();
  s.last_done = now;
  if (failure) {
    ++s.result.failed;
    ++s.window_failed;
    ++s.result.errors_by_kind[*failure];
    return;
  }
  ++s.result.succeeded;
  s.result.latency.record(now - from);
  s.window.record(now - from);
}

asio::awaitable<void> one_request(std::shared_ptr<run_state> s, clock_type::time_point intended) {
  std::optional<std::string> failure;
  try {
    failure = co_await (*s->work)(*s->client, s->options.timeout);
  } catch (const std::exception&) {
    failure = "exception";
  }
  count_outcome(*s, failure, intended);
  --s->in_flight;
  finish_if_done(*s);
}

asio::awaitable<void> open_loop(std::shared_ptr<run_state> s) {
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer timer(executor);
  const auto interval = std::chrono::duration<double>(1.0 / s->options.rate);
  const auto end = s->started + s->options.duration;
  for (std::uint64_t i = 0;; ++i) {
    const auto intended = s->started + std::chrono::duration_cast<clock_type::duration>(
                                           interval * static_cast<double>(i));
    if (intended >= end) {
      break;
    }
    const auto now = clock_type::now();
    if (intended > now) {
      timer.expires_at(intended);
      co_await timer.async_wait(asio::use_awaitable);
    } else {
      if (now - intended > s->result.max_send_lag) {
        s->result.max_send_lag = now - intended;
      }
      // Behind schedule: catch up, but let answers in between, or a late generator would
      // send everything still due in one burst without reading a single response.
      if (i % 16 == 0) {
        co_await asio::post(executor, asio::use_awaitable);
      }
    }
    ++s->result.sent;
    if (s->in_flight >= s->options.max_in_flight) {
      count_outcome(*s, std::string("overload"), intended);
      continue;
    }
    ++s->in_flight;
    asio::co_spawn(executor, one_request(s, intended), asio::detached);
  }
  s->sending = false;
  finish_if_done(*s);
}

asio::awaitable<void> closed_worker(std::shared_ptr<run_state> s) {
  const auto end = s->started + s->options.duration;
  const auto max = s->options.max_requests;
  while (clock_type::now() < end && (max == 0 || s->result.sent < max)) {
    const auto sent = clock_type::now();
    ++s->result.sent;
    ++s->in_flight;
    std::optional<std::string> failure;
    try {
      failure = co_await (*s->work)(*s->client, s->options.timeout);
    } catch (const std::exception&) {
      failure = "exception";
    }
    --s->in_flight;
    count_outcome(*s, failure, sent);
  }
}

asio::awaitable<void> progress(std::shared_ptr<run_state> s) {
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer timer(executor);
  s->ticker = &timer;
  auto next = s->started;
  for (;;) {
    next += std::chrono::seconds(1);
    timer.expires_at(next);
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (!s->sending && s->in_flight == 0) {
      s->ticker = nullptr;
      co_return;
    }
    if (!s->options.progress_label.empty()) {
      const auto t = std::chrono::duration<double>(clock_type::now() - s->started).count();
      fmt::print(stderr,
                 "[{}] {:5.1f}s  sent {:>8}  ok {:>8}  err {:>6}  in-flight {:>5}  "
                 "last second: {:>7} done, p50 {:>9.1f} us, p99 {:>9.1f} us, {} err\n",
                 s->options.progress_label, t, s->result.sent, s->result.succeeded,
                 s->result.failed, s->in_flight, s->window.count(),
                 static_cast<double>(s->window.percentile_ns(50)) / 1e3,
                 static_cast<double>(s->window.percentile_ns(99)) / 1e3, s->window_failed);
    }
    s->window.reset();
    s->window_failed = 0;
  }
}

asio::awaitable<void> run_closed(std::shared_ptr<run_state> s) {
  auto executor = co_await asio::this_coro::executor;
  // Each worker is its own coroutine; wait for all through a counter on the state.
  auto remaining = std::make_shared<unsigned>(s->options.concurrency);
  asio::steady_timer done(executor, clock_type::time_point::max());
  for (unsigned i = 0; i < s->options.concurrency; ++i) {
    asio::co_spawn(executor, closed_worker(s), [remaining, &done](std::exception_ptr) {
      if (--*remaining == 0) {
        done.cancel();
      }
    });
  }
  boost::system::error_code ec;
  co_await done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  s->sending = false;
  finish_if_done(*s);
}

} // namespace

namespace {

// One measured pass on `io`, which must be idle (fresh or restarted).
load_result run_phase(asio::io_context& io, net::http_client& client, const load_options& options,
                      const workload_fn& work) {
  auto s = std::make_shared<run_state>();
  s->options = options;
  if (s->options.concurrency == 0) {
    s->options.concurrency = 1;
  }
  s->work = &work;
  s->client = &client;
  s->started = clock_type::now();
  s->last_done = s->started;
  asio::co_spawn(io, progress(s), asio::detached);
  if (options.rate > 0) {
    asio::co_spawn(io, open_loop(s), asio::detached);
  } else {
    asio::co_spawn(io, run_closed(s), asio::detached);
  }
  io.run();
  s->result.elapsed = s->last_done - s->started;
  return std::move(s->result);
}

} // namespace

load_result run_load(const load_options& options, const workload_fn& work) {
  asio::io_context io(1);
  net::http_client_options client_options;
  client_options.max_cached_connections =
      static_cast<long>(std::max<unsigned>(options.concurrency, 64) + 16);
  net::http_client client(io.get_executor(), client_options);
  if (options.warmup.count() > 0) {
    // Same load, same client: connections are open and caches warm when measuring starts.
    auto warm = options;
    warm.duration = options.warmup;
    warm.progress_label.clear();
    run_phase(io, client, warm, work);
    io.restart();
  }
  return run_phase(io, client, options, work);
}

} // namespace troupe::bench
