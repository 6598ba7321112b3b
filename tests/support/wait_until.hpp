#pragma once

// The suite's one way to wait for a condition it cannot be told about: a file appears, a
// port answers, a process leaves the process table, a counter another component keeps
// reaches a value. Where the code under test offers an event (a future, a CAF response,
// a handler, a down message), tests wait on that event instead (support/event_count.hpp).
//
// It is also the one place in tests/ that sleeps while waiting (tests/sleeps_allowed.txt):
// the pause between two looks at the condition, never a guess at how long something
// takes.

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>

namespace troupe::test {

/// Polls `condition` until it holds (true) or `deadline` has passed (false, after one
/// last look), pausing 1 ms after the first look and doubling up to 20 ms. Use it as
/// `REQUIRE(wait_until([&] { ... }, 10s))` so the test fails, saying so, at the deadline.
inline bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds deadline) {
  const auto give_up = std::chrono::steady_clock::now() + deadline;
  auto pause = std::chrono::milliseconds(1);
  while (!condition()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= give_up) {
      return condition();
    }
    std::this_thread::sleep_for( // the poll's back-off, not a synchronisation
        std::min<std::chrono::steady_clock::duration>(pause, give_up - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
  return true;
}

} // namespace troupe::test
