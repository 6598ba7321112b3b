#pragma once

/// \file
/// The runs' series of `/metrics`, kept by their journals (run_journal.cpp): runs in
/// flight, runs submitted, runs ended by status, and how long runs took from submission
/// (queueing included) to their end. The console's overview reads them.
///
///   troupe_runs_active                      gauge: submitted, not ended (queued or running)
///   troupe_runs_started_total               counter: runs submitted
///   troupe_runs_finished_total{status}      counter: succeeded, failed, cancelled, …
///   troupe_run_duration_seconds             histogram: submission to end

#include <chrono>
#include <string_view>

#include "troupe/runtime/metrics.hpp"

namespace troupe::actors {

class run_metrics {
public:
  /// Creates the series in `registry`, which must outlive this object.
  explicit run_metrics(metrics_registry& registry);

  /// A run was submitted (its journal opened).
  void started() noexcept;
  /// A run ended with `status` (storage's name) `elapsed` after it was submitted.
  void ended(std::string_view status, std::chrono::steady_clock::duration elapsed);
  /// A run's journal went away before its run ended (shutdown): no longer in flight.
  void abandoned() noexcept;

private:
  metrics_registry& registry_;
  metric_gauge& active_;
  metric_counter& started_;
  metric_histogram& duration_;
};

} // namespace troupe::actors
