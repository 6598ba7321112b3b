#pragma once

// Private to net/src/mcp: a one-shot event coroutines on one strand wait for, each with a
// deadline of its own (a process exited, a session was re-initialized).

#include <chrono>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace troupe::net::mcp::detail {

namespace asio = boost::asio;

/// Set once; every waiter then resumes. Use on its executor only.
class async_event {
public:
  explicit async_event(asio::any_io_executor executor)
      : timer_(std::move(executor), std::chrono::steady_clock::time_point::max()) {}

  void set() {
    set_ = true;
    timer_.cancel();
  }
  bool is_set() const noexcept {
    return set_;
  }

  /// Waits until the event is set or `deadline` passes; true when it is set.
  asio::awaitable<bool> wait_until(std::chrono::steady_clock::time_point deadline) {
    using namespace asio::experimental::awaitable_operators;
    if (set_) {
      co_return true;
    }
    asio::steady_timer limit(timer_.get_executor(), deadline);
    co_await (timer_.async_wait(asio::as_tuple(asio::use_awaitable)) ||
              limit.async_wait(asio::as_tuple(asio::use_awaitable)));
    co_return set_;
  }

private:
  asio::steady_timer timer_;
  bool set_ = false;
};

/// Sleeps for `delay` on the current executor (cancellable).
inline asio::awaitable<void> pause(std::chrono::steady_clock::duration delay) {
  asio::steady_timer timer(co_await asio::this_coro::executor, delay);
  co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
}

} // namespace troupe::net::mcp::detail
