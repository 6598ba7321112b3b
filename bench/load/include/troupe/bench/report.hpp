#pragma once

/// \file
/// A benchmark report: the scenario's metrics (flat names such as "direct.p99_us", in
/// the order they were measured), its load steps and latency distributions, the
/// machine it ran on and the exact command line. Printed as a table, written as JSON,
/// compared with another report by matching metric names.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include "troupe/bench/latency_histogram.hpp"
#include "troupe/runtime/error.hpp"

namespace troupe::bench {

/// Everything one `troupe bench` run measured.
struct bench_report {
  std::string scenario;
  std::vector<std::string> command_line;
  /// The URLs measured ("direct" target and, for overhead, the "via" one).
  boost::json::object targets;
  /// The effective options of the run.
  boost::json::object options;
  /// Named figures, in print order.
  std::vector<std::pair<std::string, double>> metrics;
  /// Per load step (throughput search): rate, achieved rate, percentiles, errors.
  boost::json::array steps;
  /// Percentile curves, name -> [[percentile, microseconds], ...], for charts.
  boost::json::object distributions;
  /// Preformatted text tables (a side-by-side comparison), printed under the metrics.
  std::vector<std::string> tables;
  /// Further top-level JSON fields of the scenario (e.g. "peers": the results compared).
  boost::json::object extra;
  /// Caveats a reader must see (a half not run, a target missed).
  std::vector<std::string> notes;
  /// Machine facts at start and end (`machine_info()`).
  boost::json::object machine;

  void add(std::string name, double value);
  /// Adds `<prefix>.count`, `.p50_us`, `.p90_us`, `.p99_us`, `.p99_9_us`, `.max_us`,
  /// `.mean_us` and the percentile curve under `distributions[prefix]`.
  void add_latency(const std::string& prefix, const latency_histogram& h);
};

/// Cores, load average, kernel, CPU model and memory, read from /proc and uname.
boost::json::object machine_info();

/// Percentile curve of a histogram in microseconds (a fixed set of percentiles).
boost::json::array percentile_curve(const latency_histogram& h);

/// The report as a JSON object (what `to_json` prints).
boost::json::object to_json_object(const bench_report& report);

/// Any JSON value as indented text with a final newline (numbers in their shortest form).
std::string to_pretty_json(const boost::json::value& value);

/// The report as pretty JSON text.
std::string to_json(const bench_report& report);

/// The report as an aligned text table with the notes under it.
std::string format_table(const bench_report& report);

/// Reads two JSON reports and lists every metric present in both: A, B and B/A.
expected<std::string> compare_reports(const std::string& path_a, const std::string& path_b);

/// Runs bench/load/chart.py on a written report to produce `png_path`; an error when
/// python3 or matplotlib is missing or the script fails.
expected<void> write_chart(const std::string& json_path, const std::string& png_path);

} // namespace troupe::bench
