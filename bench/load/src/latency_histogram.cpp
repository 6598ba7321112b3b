#include "troupe/bench/latency_histogram.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace troupe::bench {

namespace {

// Values below 2 * sub_half are their own bucket; above, each power of two [2^k, 2^(k+1))
// is split into sub_half equal buckets, so a bucket is at most 1/sub_half of its lower
// bound wide and its midpoint within 1/(2 * sub_half) = 0.4 % of any value in it.
constexpr std::uint64_t sub_half = 128;
constexpr std::uint64_t linear_limit = 2 * sub_half; // 256
constexpr int sub_bits = 8;                          // bit width of linear_limit - 1

std::size_t index_of(std::uint64_t v) noexcept {
  if (v < linear_limit) {
    return static_cast<std::size_t>(v);
  }
  const int shift = static_cast<int>(std::bit_width(v)) - sub_bits; // >= 1
  const std::uint64_t mantissa = v >> shift;                        // in [128, 256)
  return static_cast<std::size_t>(linear_limit + static_cast<std::uint64_t>(shift - 1) * sub_half +
                                  (mantissa - sub_half));
}

} // namespace

std::size_t latency_histogram::bucket_of(std::uint64_t ns) noexcept {
  return index_of(std::min(ns, max_trackable_ns));
}

std::size_t latency_histogram::bucket_count() noexcept {
  return index_of(max_trackable_ns) + 1;
}

std::uint64_t latency_histogram::bucket_value(std::size_t index) noexcept {
  if (index < linear_limit) {
    return index;
  }
  const std::uint64_t rel = index - linear_limit;
  const auto shift = static_cast<int>(rel / sub_half) + 1;
  const std::uint64_t mantissa = sub_half + rel % sub_half;
  const std::uint64_t lower = mantissa << shift;
  const std::uint64_t width = std::uint64_t{1} << shift;
  return lower + width / 2;
}

latency_histogram::latency_histogram() : counts_(bucket_count(), 0) {}

void latency_histogram::record(std::chrono::nanoseconds value) noexcept {
  record_ns(value.count() > 0 ? static_cast<std::uint64_t>(value.count()) : 0);
}

void latency_histogram::record_ns(std::uint64_t ns) noexcept {
  ns = std::min(ns, max_trackable_ns);
  ++counts_[index_of(ns)];
  if (count_ == 0 || ns < min_) {
    min_ = ns;
  }
  max_ = std::max(max_, ns);
  ++count_;
  sum_ += static_cast<long double>(ns);
}

void latency_histogram::merge(const latency_histogram& other) noexcept {
  if (other.count_ == 0) {
    return;
  }
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    counts_[i] += other.counts_[i];
  }
  min_ = count_ == 0 ? other.min_ : std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  count_ += other.count_;
  sum_ += other.sum_;
}

void latency_histogram::reset() noexcept {
  std::fill(counts_.begin(), counts_.end(), 0);
  count_ = 0;
  min_ = 0;
  max_ = 0;
  sum_ = 0;
}

double latency_histogram::mean_ns() const noexcept {
  return count_ ? static_cast<double>(sum_ / static_cast<long double>(count_)) : 0.0;
}

std::uint64_t latency_histogram::percentile_ns(double p) const noexcept {
  if (count_ == 0) {
    return 0;
  }
  if (p >= 100.0) {
    return max_;
  }
  p = std::max(p, 0.0);
  auto rank = static_cast<std::uint64_t>(std::ceil(p / 100.0 * static_cast<double>(count_)));
  rank = std::clamp<std::uint64_t>(rank, 1, count_);
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      // The exact extremes are known; never report outside them.
      return std::clamp(bucket_value(i), min_, max_);
    }
  }
  return max_;
}

} // namespace troupe::bench
