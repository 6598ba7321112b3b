#pragma once

/// \file
/// Process metrics in the Prometheus text exposition format (version 0.0.4): counters,
/// gauges and histograms, with labels. Updates are lock-free atomics; only creating a
/// new series takes a lock, so callers should keep the returned references.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe {

/// Label name/value pairs of one series, e.g. {{"route", "/healthz"}, {"status", "200"}}.
using metric_labels = std::vector<std::pair<std::string, std::string>>;

/// A monotonically increasing count.
class metric_counter {
public:
  void add(std::uint64_t delta = 1) noexcept {
    value_.fetch_add(delta, std::memory_order_relaxed);
  }
  std::uint64_t value() const noexcept {
    return value_.load(std::memory_order_relaxed);
  }

private:
  std::atomic<std::uint64_t> value_{0};
};

/// A value that goes up and down (open connections, open streams).
class metric_gauge {
public:
  void add(std::int64_t delta) noexcept {
    value_.fetch_add(delta, std::memory_order_relaxed);
  }
  void set(std::int64_t value) noexcept {
    value_.store(value, std::memory_order_relaxed);
  }
  std::int64_t value() const noexcept {
    return value_.load(std::memory_order_relaxed);
  }

private:
  std::atomic<std::int64_t> value_{0};
};

/// Bucketed observations (latencies in seconds by default).
class metric_histogram {
public:
  explicit metric_histogram(std::span<const double> upper_bounds);

  /// Records one observation.
  void observe(double value) noexcept;

  std::span<const double> upper_bounds() const noexcept {
    return bounds_;
  }
  /// Observations <= upper_bounds()[i] (non-cumulative), plus one overflow bucket.
  std::vector<std::uint64_t> bucket_counts() const;
  std::uint64_t count() const noexcept {
    return count_.load(std::memory_order_relaxed);
  }
  double sum() const noexcept;

private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;
  std::atomic<std::uint64_t> count_{0};
  // The sum in nanounits, so it can be an integer atomic.
  std::atomic<std::uint64_t> sum_nano_{0};
};

/// Default latency buckets in seconds: 100 µs to 10 s.
std::span<const double> default_latency_buckets() noexcept;

/// Owns every series of the process and renders them for `GET /metrics`.
class metrics_registry {
public:
  metrics_registry() = default;
  metrics_registry(const metrics_registry&) = delete;
  metrics_registry& operator=(const metrics_registry&) = delete;

  /// The counter series `name{labels}`, created on first use. The reference stays valid
  /// for the registry's lifetime.
  metric_counter& counter(std::string_view name, std::string_view help,
                          const metric_labels& labels = {});
  /// The gauge series `name{labels}`, created on first use.
  metric_gauge& gauge(std::string_view name, std::string_view help,
                      const metric_labels& labels = {});
  /// The histogram series `name{labels}`, created on first use with `upper_bounds`.
  metric_histogram& histogram(std::string_view name, std::string_view help,
                              const metric_labels& labels = {},
                              std::span<const double> upper_bounds = default_latency_buckets());
  /// A gauge whose value is read from `read` at render time (e.g. live actors). Replaces
  /// an earlier callback of the same name.
  void gauge_callback(std::string_view name, std::string_view help, std::function<double()> read);

  /// The whole registry in Prometheus text format.
  std::string render() const;

private:
  enum class kind { counter, gauge, histogram, callback };
  struct family {
    kind type;
    std::string help;
    std::map<std::string, std::unique_ptr<metric_counter>> counters;
    std::map<std::string, std::unique_ptr<metric_gauge>> gauges;
    std::map<std::string, std::unique_ptr<metric_histogram>> histograms;
    std::function<double()> read;
  };

  family& family_for(std::string_view name, std::string_view help, kind type);

  mutable std::mutex mutex_;
  std::map<std::string, family, std::less<>> families_;
};

/// Renders `{a="x",b="y"}` with Prometheus escaping ("" for no labels).
std::string render_metric_labels(const metric_labels& labels);

} // namespace troupe
