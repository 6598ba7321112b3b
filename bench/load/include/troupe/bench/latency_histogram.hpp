#pragma once

/// \file
/// An HDR-style latency histogram: log-linear buckets with 128 linear sub-buckets per
/// power of two, so every recorded value is known to within 1/256 (0.4 %) of itself,
/// from 1 ns up to one hour. Fixed memory (about 45 KiB), O(1) record, mergeable.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace troupe::bench {

/// Counts of durations in log-linear buckets, with exact count, min, max and sum.
class latency_histogram {
public:
  /// The largest value kept; longer ones are recorded as this.
  static constexpr std::uint64_t max_trackable_ns = 3'600ull * 1'000'000'000ull;

  latency_histogram();

  void record(std::chrono::nanoseconds value) noexcept;
  void record_ns(std::uint64_t ns) noexcept;
  /// Adds every value recorded in `other`.
  void merge(const latency_histogram& other) noexcept;
  void reset() noexcept;

  std::uint64_t count() const noexcept {
    return count_;
  }
  /// Exact smallest and largest value (0 when empty).
  std::uint64_t min_ns() const noexcept {
    return count_ ? min_ : 0;
  }
  std::uint64_t max_ns() const noexcept {
    return max_;
  }
  double mean_ns() const noexcept;

  /// The value at percentile `p` (0-100): the smallest recorded value v such that at
  /// least p % of values are <= v, within the bucket precision. 0 when empty; the exact
  /// max for p = 100.
  std::uint64_t percentile_ns(double p) const noexcept;

  /// Bucket index of a value (exposed for tests).
  static std::size_t bucket_of(std::uint64_t ns) noexcept;
  /// The representative (midpoint) value of a bucket.
  static std::uint64_t bucket_value(std::size_t index) noexcept;
  static std::size_t bucket_count() noexcept;

private:
  std::vector<std::uint64_t> counts_;
  std::uint64_t count_ = 0;
  std::uint64_t min_ = 0;
  std::uint64_t max_ = 0;
  long double sum_ = 0;
};

} // namespace troupe::bench
