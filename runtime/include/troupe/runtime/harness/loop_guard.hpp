#pragma once

/// \file
/// The loop guard: stops a model that repeats the same tool call, or bounces between two
/// calls, instead of making progress. Calls are compared by tool name and canonical
/// arguments (JSON with sorted keys and no white space), so `{"a":1, "b":2}` and
/// `{"b":2,"a":1}` are the same call.

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

namespace troupe::harness {

/// What the guard says about a call.
struct loop_verdict {
  enum class kind {
    /// Nothing suspicious.
    ok,
    /// The call repeats the previous calls; the run should refuse it.
    repeated_call,
    /// The call continues an A-B-A-B alternation.
    ping_pong,
  };
  kind what = kind::ok;
  /// True when the call must not run; false for ok and for a ping-pong warning.
  bool blocked = false;
  /// For the model, when not ok: what was detected and what to do instead.
  std::string message;

  bool ok() const noexcept {
    return what == kind::ok;
  }
};

/// `arguments` as canonical JSON (object keys sorted, no white space); the trimmed text
/// itself when it is not JSON, and "{}" when it is empty.
std::string canonical_arguments(std::string_view arguments);

/// Watches one run's tool calls. Not thread-safe: owned by the run actor.
class loop_guard {
public:
  /// Calls remembered.
  static constexpr std::size_t history_limit = 32;
  /// The nth identical consecutive call is blocked (AIClaw: the 5th).
  static constexpr std::size_t repeat_limit = 5;
  /// An alternation of this many calls (A-B-A-B) draws a warning …
  static constexpr std::size_t ping_pong_warning = 4;
  /// … and of this many (A-B-A-B-A-B) is blocked.
  static constexpr std::size_t ping_pong_limit = 6;

  /// Judges a call and records it (blocked calls are recorded too: a model that keeps
  /// sending a refused call stays refused).
  loop_verdict check(std::string_view tool, std::string_view arguments);
  /// Calls remembered so far (at most history_limit).
  std::size_t size() const noexcept {
    return history_.size();
  }
  void clear() noexcept {
    history_.clear();
  }

private:
  // FNV-1a of tool name and canonical arguments; collisions would need 2^32 calls.
  std::deque<std::uint64_t> history_;
};

} // namespace troupe::harness
