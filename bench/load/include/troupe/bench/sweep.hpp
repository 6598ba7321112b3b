#pragma once

/// \file
/// `troupe bench --sweep KEY=V1,V2,…`: one scenario run once per value of a troupe
/// setting, back to back, each against a fresh troupe child started with that value; a
/// table of the scenario's headline figures per value and the best value by the
/// scenario's main metric.
///
/// - A key is any key of troupe's settings catalog (`troupe serve --print-config`) except
///   `listen` and `data_dir`, which the bench sets itself.
/// - A value is TOML value text, exactly as `--troupe-set KEY=VALUE` takes it (`2`,
///   `"sharing"`, `true`). A plain word (letters, digits, `_ - . : /`) that is not a TOML
///   value is taken as a string, but only for a key whose value is a string (so
///   `actors.scheduler_policy=sharing,shards` works; `actors.shards=two` is an error).
/// - Values are split at commas outside quotes and brackets.
/// - Several `--sweep` options run their cartesian product (at most `max_sweep_points`
///   points), the first key varying slowest.
/// - Everything is checked before anything runs: an unknown key, an empty list, an empty
///   or bad value, a key given twice or also by `--troupe-set`.

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/json/object.hpp>

#include "troupe/bench/report.hpp"
#include "troupe/bench/scenarios.hpp"
#include "troupe/runtime/error.hpp"

namespace troupe::bench {

/// The most points (runs) one sweep may have.
constexpr std::size_t max_sweep_points = 64;

/// One value of a swept key.
struct sweep_value {
  /// TOML value text, as written into troupe's config (`2`, `"sharing"`).
  std::string toml;
  /// How the table shows it (`2`, `sharing`).
  std::string label;
};

/// One swept key and its values, in the order given.
struct sweep_axis {
  std::string key;
  std::vector<sweep_value> values;
};

/// Parses and checks one `KEY=V1,V2,…` against troupe's settings (each value is applied to
/// the defaults as troupe would apply it from its config file). Errors name the key.
expected<sweep_axis> parse_sweep(std::string_view text);

/// Checks the axes against each other and the scenario options: at least one axis, no key
/// twice, no key also given by `--troupe-set`, a troupe started here (not `--troupe`), a
/// scenario that starts troupe (overhead, throughput and stream need `--via troupe`), no
/// `--peers-out`, at most `max_sweep_points` points.
expected<void> validate_sweep(const scenario_options& options, const std::vector<sweep_axis>& axes);

/// A figure of a scenario's report shown in the sweep table.
struct sweep_metric {
  /// The report's metric name (`c100.runs_per_s`).
  std::string name;
  /// A short column heading (`runs/s`).
  std::string heading;
  bool higher_is_better = true;
};

/// The figures a sweep shows for a scenario: its main metric (the one the best point is
/// chosen by) first, and the metric counting failed requests (empty: the scenario has
/// none).
struct sweep_headline {
  std::vector<sweep_metric> columns;
  std::string errors_metric;
  const sweep_metric& main() const {
    return columns.front();
  }
};

/// The headline of `report` by its scenario (names absent from the report are left out;
/// the main metric is always first). agent: runs/s at the highest concurrency level
/// measured (higher is better); storage: persisted messages/s (higher); overhead: added
/// p50 (lower); throughput: the best rate of the search, or the achieved rate of a fixed
/// step (higher); stream: tokens/s for the fire hose (higher), else the added TTFT p99
/// (lower); idle: KiB per conversation with a waiting run and a subscriber (lower).
sweep_headline headline_of(const bench_report& report);

/// One run of a sweep.
struct sweep_point {
  /// Key -> value of this point, in axis order.
  std::vector<std::pair<std::string, sweep_value>> settings;
  /// The scenario's report, or why the run failed.
  std::optional<bench_report> report;
  std::string error;
  /// The point's settings as `KEY=VALUE, KEY=VALUE` (labels).
  std::string describe() const;
};

/// A whole sweep.
struct sweep_result {
  std::string scenario;
  std::vector<std::string> command_line;
  std::vector<sweep_axis> axes;
  std::vector<sweep_point> points;
  /// From the first report (empty columns when no point ran).
  sweep_headline headline;
  /// The point with the best main metric among those that ran without errors.
  std::optional<std::size_t> best;
  boost::json::object machine;
  std::vector<std::string> notes;
};

/// Every point of the axes' cartesian product, the first axis varying slowest.
std::vector<sweep_point> sweep_points(const std::vector<sweep_axis>& axes);

/// Chooses the best point of `result` by its headline's main metric (points with a
/// failed run or errors do not take part) and adds notes on how far ahead it is.
void choose_best(sweep_result& result);

/// Called after each point ran (index from 0, and the number of points).
using sweep_progress = std::function<void(const sweep_point&, std::size_t, std::size_t)>;

/// Checks everything, then runs the scenario once per point, back to back (each run starts
/// its own troupe with the point's settings over `options.troupe_settings`). Fails before
/// running anything when the options or axes are wrong; a point whose run fails is recorded
/// with its error and the sweep goes on.
expected<sweep_result> run_sweep(const scenario_options& options,
                                 const std::vector<sweep_axis>& axes,
                                 const sweep_progress& progress = {});

/// The sweep as a text table (a column per key, then the headline figures, a mark on the
/// best row), the best point and the notes.
std::string format_sweep_table(const sweep_result& result);

/// The sweep as pretty JSON: axes, main metric and direction, each point's settings,
/// headline figures and full report (or error), and the best point.
std::string sweep_to_json(const sweep_result& result);

} // namespace troupe::bench
