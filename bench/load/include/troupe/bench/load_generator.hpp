#pragma once

/// \file
/// The load generator: runs one workload for a while on its own io_context (one
/// thread) and measures it.
///
/// Open loop (`rate` > 0): request i is due at start + i / rate. Its latency is measured
/// from that INTENDED send time, not from when it actually went out, so a slow server
/// (or a generator that falls behind) shows up as latency instead of silently lowering
/// the rate: coordinated omission is avoided. Requests are not held back by earlier
/// ones still in flight.
///
/// Closed loop (`rate` == 0): `concurrency` workers each send a request, wait for its
/// answer and send the next; latency runs from send to answer. This measures what N
/// users who wait see, and the throughput they get.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include <boost/asio/awaitable.hpp>

#include "troupe/bench/latency_histogram.hpp"
#include "troupe/net/http_client.hpp"

namespace troupe::bench {

/// One request of a workload: the client to send it with and the request's deadline.
/// Returns nullopt on success, else the kind of error ("timeout", "http_500", …).
using workload_fn = std::function<boost::asio::awaitable<std::optional<std::string>>(
    net::http_client& client, std::chrono::milliseconds timeout)>;

/// How to drive a workload.
struct load_options {
  /// Arrivals per second (open loop); 0 selects the closed loop.
  double rate = 0;
  /// Closed-loop workers.
  unsigned concurrency = 1;
  std::chrono::milliseconds duration{5'000};
  /// Run the same load this long first, unmeasured, on the same connections.
  std::chrono::milliseconds warmup{0};
  /// Deadline of each request (its whole transfer).
  std::chrono::milliseconds timeout{5'000};
  /// Open loop: most requests in flight; arrivals beyond it count as "overload" errors
  /// (they are not sent, and not waited for) so an overwhelmed target cannot exhaust
  /// the machine's sockets.
  unsigned max_in_flight = 10'000;
  /// Closed loop: stop starting requests after this many (0: only `duration` limits).
  std::uint64_t max_requests = 0;
  /// A line per second on stderr ("" silences it).
  std::string progress_label;
};

/// What a run measured.
struct load_result {
  /// Open loop: from intended send time; closed loop: from send.
  latency_histogram latency;
  std::uint64_t sent = 0;
  std::uint64_t succeeded = 0;
  std::uint64_t failed = 0;
  std::map<std::string, std::uint64_t> errors_by_kind;
  /// From the first send until the last answer.
  std::chrono::nanoseconds elapsed{0};
  /// Open loop: the largest lateness of a send behind its intended time (the
  /// generator's own lag).
  std::chrono::nanoseconds max_send_lag{0};

  double achieved_rate() const noexcept;
};

/// Runs `work` as configured, on a fresh io_context on the calling thread, and returns
/// when every request has finished (at most `timeout` after `duration`).
load_result run_load(const load_options& options, const workload_fn& work);

/// Maps a troupe error from the HTTP client to a short error kind ("timeout",
/// "unavailable", …).
std::string error_kind(const error& e);

} // namespace troupe::bench
