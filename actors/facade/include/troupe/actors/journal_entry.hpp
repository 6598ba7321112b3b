#pragma once

/// \file
/// What a run journal hands out, as values: one entry as it goes out over SSE, and where
/// a journaled run stands. CAF-free, so `api/` can translate and show them.

#include <cstdint>
#include <optional>
#include <string>

#include "troupe/actors/run_result.hpp"

namespace troupe::actors {

/// One entry, as it goes out over SSE.
struct journal_entry {
  std::uint64_t seq = 0;
  /// The SSE event name; empty for the closing `[DONE]`.
  std::string event;
  std::string data;
  /// True for the last entry of the journal.
  bool last = false;
};

/// Where a journaled run stands.
struct run_status_view {
  /// queued, running, succeeded, failed or cancelled.
  std::string status = "queued";
  std::uint64_t last_seq = 0;
  /// Set once the run ended.
  std::optional<run_result> result;
};

} // namespace troupe::actors
