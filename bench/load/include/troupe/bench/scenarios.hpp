#pragma once

/// \file
/// The named scenarios of `troupe bench`. Each takes the same options, runs against a
/// loopback target (a mock-llm started in-process when none is given) and returns a
/// report.
///
/// - `overhead`: the same non-streaming chat completion sent straight to the target
///   and through `via`, interleaved at concurrency 1; p50/p99 of each and the added
///   latency. Without `via`, only the direct half runs (and the report says so).
/// - `throughput`: open-loop steps at rising rates (doubling, then bisecting) against
///   `via` (else the target) with an instant mock answer; the highest rate whose p99
///   stays under `p99_bound` with zero errors. `rate` or `concurrency` runs one fixed
///   step instead.
/// - `stream`: `concurrency` concurrent streamed completions of `tokens` chunks paced
///   `token_delay` apart; time to first token and inter-token gaps measured at the
///   client, tokens/s. `fire_hose` sets the delay to zero for the relay ceiling.
/// - `idle`, `agent`, `storage`: declared; they need troupe's chat API (issue 6).

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/bench/report.hpp"
#include "troupe/runtime/error.hpp"

namespace troupe::bench {

/// Options of one run (the CLI's flags).
struct scenario_options {
  std::string scenario = "overhead";
  /// Loopback URL of an OpenAI-compatible model server (mock-llm); a bare origin or a
  /// base URL ending in /v1 means its /v1/chat/completions, another path is used as is. Empty:
  /// start a mock-llm in-process on 127.0.0.1:0.
  std::string target;
  /// Loopback URL of the second path for `overhead` (e.g. troupe's chat route), used as
  /// given (a bare origin or .../v1 as for `target`).
  std::string via;
  /// Open-loop arrivals per second (0: not set).
  double rate = 0;
  /// Closed-loop workers / concurrent streams (0: the scenario's default).
  unsigned concurrency = 0;
  /// Length of the run (throughput: of each step).
  std::chrono::milliseconds duration{5'000};
  std::chrono::milliseconds timeout{5'000};
  /// throughput: the p99 a step must stay under.
  std::chrono::microseconds p99_bound{1'000};
  /// Words per answer; stream: chunks per stream (0: 16 for chat scenarios, 64 for a
  /// paced stream, 1024 for the fire hose).
  unsigned tokens = 0;
  /// stream: delay between chunks.
  unsigned token_delay_ms = 20;
  bool fire_hose = false;
  /// Progress lines on stderr.
  bool progress = true;
  /// Recorded verbatim in the report.
  std::vector<std::string> command_line;
};

/// Every scenario name, the runnable ones first.
const std::vector<std::string_view>& scenario_names();

/// Checks the options (known scenario, loopback targets) without sending anything.
expected<void> validate(const scenario_options& options);

/// Runs the scenario. Fails with `invalid_argument` / `permission_denied` before any
/// traffic when the options are wrong, `unavailable` when the scenario needs the chat
/// API, or when the target does not answer at all.
expected<bench_report> run_scenario(const scenario_options& options);

} // namespace troupe::bench
