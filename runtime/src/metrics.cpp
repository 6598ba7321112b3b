#include "troupe/runtime/metrics.hpp"

#include <cassert>
#include <cmath>

#include <fmt/format.h>

namespace troupe {

namespace {

constexpr double latency_buckets[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                      0.05,   0.1,     0.25,   0.5,   1.0,    2.5,   5.0,  10.0};

void append_escaped_label_value(std::string& out, std::string_view value) {
  for (const char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out.push_back(c);
    }
  }
}

std::string format_number(double value) {
  if (std::isinf(value)) {
    return value > 0 ? "+Inf" : "-Inf";
  }
  return fmt::format("{}", value);
}

// Inserts an extra label (such as le="0.5") into a rendered label set.
std::string with_label(const std::string& labels, std::string_view name, std::string_view value) {
  std::string extra = fmt::format("{}=\"{}\"", name, value);
  if (labels.empty()) {
    return "{" + extra + "}";
  }
  return labels.substr(0, labels.size() - 1) + "," + extra + "}";
}

} // namespace

std::span<const double> default_latency_buckets() noexcept {
  return latency_buckets;
}

std::string render_metric_labels(const metric_labels& labels) {
  if (labels.empty()) {
    return {};
  }
  std::string out = "{";
  bool first = true;
  for (const auto& [name, value] : labels) {
    if (!first) {
      out.push_back(',');
    }
    first = false;
    out += name;
    out += "=\"";
    append_escaped_label_value(out, value);
    out.push_back('"');
  }
  out.push_back('}');
  return out;
}

metric_histogram::metric_histogram(std::span<const double> upper_bounds)
    : bounds_(upper_bounds.begin(), upper_bounds.end()),
      buckets_(new std::atomic<std::uint64_t>[upper_bounds.size() + 1]) {
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    buckets_[i].store(0, std::memory_order_relaxed);
  }
}

void metric_histogram::observe(double value) noexcept {
  std::size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) {
    ++i;
  }
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  if (value > 0) {
    sum_nano_.fetch_add(static_cast<std::uint64_t>(value * 1e9), std::memory_order_relaxed);
  }
}

std::vector<std::uint64_t> metric_histogram::bucket_counts() const {
  std::vector<std::uint64_t> counts(bounds_.size() + 1);
  for (std::size_t i = 0; i < counts.size(); ++i) {
    counts[i] = buckets_[i].load(std::memory_order_relaxed);
  }
  return counts;
}

double metric_histogram::sum() const noexcept {
  return static_cast<double>(sum_nano_.load(std::memory_order_relaxed)) / 1e9;
}

metrics_registry::family& metrics_registry::family_for(std::string_view name, std::string_view help,
                                                       kind type) {
  auto it = families_.find(name);
  if (it == families_.end()) {
    it =
        families_.emplace(std::string(name), family{type, std::string(help), {}, {}, {}, {}}).first;
  }
  assert(it->second.type == type && "one metric name used with two types");
  return it->second;
}

metric_counter& metrics_registry::counter(std::string_view name, std::string_view help,
                                          const metric_labels& labels) {
  std::lock_guard lock(mutex_);
  auto& slot = family_for(name, help, kind::counter).counters[render_metric_labels(labels)];
  if (!slot) {
    slot = std::make_unique<metric_counter>();
  }
  return *slot;
}

metric_gauge& metrics_registry::gauge(std::string_view name, std::string_view help,
                                      const metric_labels& labels) {
  std::lock_guard lock(mutex_);
  auto& slot = family_for(name, help, kind::gauge).gauges[render_metric_labels(labels)];
  if (!slot) {
    slot = std::make_unique<metric_gauge>();
  }
  return *slot;
}

metric_histogram& metrics_registry::histogram(std::string_view name, std::string_view help,
                                              const metric_labels& labels,
                                              std::span<const double> upper_bounds) {
  std::lock_guard lock(mutex_);
  auto& slot = family_for(name, help, kind::histogram).histograms[render_metric_labels(labels)];
  if (!slot) {
    slot = std::make_unique<metric_histogram>(upper_bounds);
  }
  return *slot;
}

void metrics_registry::gauge_callback(std::string_view name, std::string_view help,
                                      std::function<double()> read) {
  std::lock_guard lock(mutex_);
  family_for(name, help, kind::callback).read = std::move(read);
}

std::string metrics_registry::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  out.reserve(4096);
  for (const auto& [name, fam] : families_) {
    const char* type_name = "gauge";
    if (fam.type == kind::counter) {
      type_name = "counter";
    } else if (fam.type == kind::histogram) {
      type_name = "histogram";
    }
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, fam.help, name, type_name);
    switch (fam.type) {
      case kind::counter:
        for (const auto& [labels, c] : fam.counters) {
          out += fmt::format("{}{} {}\n", name, labels, c->value());
        }
        break;
      case kind::gauge:
        for (const auto& [labels, g] : fam.gauges) {
          out += fmt::format("{}{} {}\n", name, labels, g->value());
        }
        break;
      case kind::callback:
        out += fmt::format("{} {}\n", name, format_number(fam.read ? fam.read() : 0.0));
        break;
      case kind::histogram:
        for (const auto& [labels, h] : fam.histograms) {
          const auto counts = h->bucket_counts();
          const auto bounds = h->upper_bounds();
          std::uint64_t cumulative = 0;
          for (std::size_t i = 0; i < bounds.size(); ++i) {
            cumulative += counts[i];
            out += fmt::format("{}_bucket{} {}\n", name,
                               with_label(labels, "le", format_number(bounds[i])), cumulative);
          }
          cumulative += counts.back();
          out +=
              fmt::format("{}_bucket{} {}\n", name, with_label(labels, "le", "+Inf"), cumulative);
          out += fmt::format("{}_sum{} {}\n", name, labels, format_number(h->sum()));
          out += fmt::format("{}_count{} {}\n", name, labels, cumulative);
        }
        break;
    }
  }
  return out;
}

} // namespace troupe
