#pragma once

// A count of things that happened, raised by the code under test (a callback, a handler,
// a tool body) and awaited by the test thread with a deadline: how a test waits for an
// event it is told about, instead of sleeping or polling.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>

namespace troupe::test {

class event_count {
public:
  /// Counts one more event and wakes every waiter. Safe from any thread.
  void raise() {
    {
      const std::lock_guard lock(mutex_);
      ++count_;
    }
    changed_.notify_all();
  }

  /// Waits until at least `n` events happened (true) or `deadline` passed (false).
  bool wait_for(std::size_t n, std::chrono::milliseconds deadline) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, deadline, [&] { return count_ >= n; });
  }

  std::size_t value() const {
    const std::lock_guard lock(mutex_);
    return count_;
  }

private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t count_ = 0;
};

} // namespace troupe::test
