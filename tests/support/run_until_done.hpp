#pragma once

// Runs a coroutine to completion on a test-local io_context: how a test thread waits for
// an awaitable (an HTTP call through net's client) without a thread of its own.

#include <exception>
#include <optional>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

namespace troupe::test {

namespace asio = boost::asio;

/// Runs `task` on `io` until it completes (other work, such as curl's timers, may stay
/// pending) and returns its value; rethrows its exception.
template <class T> T run_until_done(asio::io_context& io, asio::awaitable<T> task) {
  std::optional<T> out;
  std::exception_ptr failure;
  bool done = false;
  asio::co_spawn(io, std::move(task), [&](std::exception_ptr e, T value) {
    failure = e;
    if (!e) {
      out.emplace(std::move(value));
    }
    done = true;
  });
  while (!done) {
    // run_one stops the context when it runs out of work; start it again.
    if (io.stopped()) {
      io.restart();
    }
    io.run_one();
  }
  if (failure) {
    std::rethrow_exception(failure);
  }
  return std::move(*out);
}

} // namespace troupe::test
