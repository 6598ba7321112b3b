#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "troupe/bench/latency_histogram.hpp"

using troupe::bench::latency_histogram;

namespace {

// The exact percentile by the same definition as the histogram's (nearest rank).
std::uint64_t exact_percentile(std::vector<std::uint64_t> values, double p) {
  std::sort(values.begin(), values.end());
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  rank = std::clamp<std::size_t>(rank, 1, values.size());
  return values[rank - 1];
}

double relative_error(std::uint64_t got, std::uint64_t want) {
  return std::abs(static_cast<double>(got) - static_cast<double>(want)) / static_cast<double>(want);
}

} // namespace

TEST_CASE("latency histogram keeps every value within 0.4 % from 1 us to 1 h",
          "[bench][histogram]") {
  for (std::uint64_t v = 1'000; v <= latency_histogram::max_trackable_ns; v = v * 1'009 / 1'000) {
    const auto back = latency_histogram::bucket_value(latency_histogram::bucket_of(v));
    INFO("value " << v << " ns reads back as " << back);
    REQUIRE(relative_error(back, v) <= 1.0 / 256 + 1e-9);
  }
  CHECK(latency_histogram::bucket_count() < 6'000);
}

TEST_CASE("latency histogram percentiles of known distributions are within 1 %",
          "[bench][histogram]") {
  std::mt19937_64 rng(42);
  std::exponential_distribution<double> exponential(1.0 / 200'000.0);        // mean 200 us
  std::lognormal_distribution<double> lognormal(std::log(5'000'000.0), 1.5); // around 5 ms
  for (int which = 0; which < 3; ++which) {
    std::vector<std::uint64_t> values;
    latency_histogram h;
    for (int i = 0; i < 100'000; ++i) {
      double v = which == 0   ? exponential(rng)
                 : which == 1 ? lognormal(rng)
                              : 1'000.0 * (1 + i); // uniform 1 us .. 100 ms
      const auto ns = static_cast<std::uint64_t>(std::max(1'000.0, v));
      values.push_back(ns);
      h.record_ns(ns);
    }
    INFO("distribution " << which);
    CHECK(h.count() == values.size());
    CHECK(h.min_ns() == *std::min_element(values.begin(), values.end()));
    CHECK(h.max_ns() == *std::max_element(values.begin(), values.end()));
    CHECK(h.percentile_ns(100) == h.max_ns());
    for (const double p : {50.0, 90.0, 99.0, 99.9}) {
      INFO("p" << p);
      CHECK(relative_error(h.percentile_ns(p), exact_percentile(values, p)) < 0.01);
    }
  }
}

TEST_CASE("merged latency histograms equal one histogram of all values", "[bench][histogram]") {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::uint64_t> fast(1'000, 100'000);
  std::uniform_int_distribution<std::uint64_t> slow(1'000'000, 50'000'000);
  latency_histogram a;
  latency_histogram b;
  latency_histogram all;
  for (int i = 0; i < 10'000; ++i) {
    const auto x = fast(rng);
    const auto y = slow(rng);
    a.record_ns(x);
    b.record_ns(y);
    all.record_ns(x);
    all.record_ns(y);
  }
  latency_histogram merged;
  merged.merge(a);
  merged.merge(b);
  CHECK(merged.count() == all.count());
  CHECK(merged.min_ns() == all.min_ns());
  CHECK(merged.max_ns() == all.max_ns());
  CHECK(merged.mean_ns() == Approx(all.mean_ns()));
  for (const double p : {1.0, 50.0, 75.0, 99.0, 99.9}) {
    CHECK(merged.percentile_ns(p) == all.percentile_ns(p));
  }
  // The slow half dominates the top: p75 comes from b's range.
  CHECK(merged.percentile_ns(75) >= 1'000'000);
}

TEST_CASE("latency histogram clamps values beyond an hour and reads empty as zero",
          "[bench][histogram]") {
  latency_histogram h;
  CHECK(h.percentile_ns(99) == 0);
  CHECK(h.max_ns() == 0);
  h.record(std::chrono::hours(5));
  CHECK(h.max_ns() == latency_histogram::max_trackable_ns);
  CHECK(h.percentile_ns(50) == latency_histogram::max_trackable_ns);
  h.reset();
  CHECK(h.count() == 0);
}
