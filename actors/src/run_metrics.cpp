#include "troupe/actors/run_metrics.hpp"

#include <array>
#include <string>

namespace troupe::actors {

namespace {

/// Runs take from a tenth of a second (a scripted answer) to minutes (tools, sub-agents).
constexpr std::array<double, 14> run_duration_buckets = {0.05, 0.1, 0.25, 0.5, 1,   2.5, 5,
                                                         10,   20,  30,   60,  120, 300, 600};

constexpr std::string_view finished_help = "Runs that ended, by status";

} // namespace

run_metrics::run_metrics(metrics_registry& registry)
    : registry_(registry),
      active_(
          registry.gauge("troupe_runs_active", "Runs submitted and not ended (queued or running)")),
      started_(registry.counter("troupe_runs_started_total", "Runs submitted")),
      duration_(registry.histogram("troupe_run_duration_seconds",
                                   "Time from a run's submission to its end (queueing included)",
                                   {}, run_duration_buckets)) {
  // The usual statuses are listed from the start, at 0, so a rate over them is defined.
  for (const char* status : {"succeeded", "failed", "cancelled"}) {
    (void)registry.counter("troupe_runs_finished_total", finished_help, {{"status", status}});
  }
}

void run_metrics::started() noexcept {
  started_.add();
  active_.add(1);
}

void run_metrics::ended(std::string_view status, std::chrono::steady_clock::duration elapsed) {
  active_.add(-1);
  registry_.counter("troupe_runs_finished_total", finished_help, {{"status", std::string(status)}})
      .add();
  duration_.observe(std::chrono::duration<double>(elapsed).count());
}

void run_metrics::abandoned() noexcept {
  active_.add(-1);
}

} // namespace troupe::actors
