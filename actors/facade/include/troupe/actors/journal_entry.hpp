#pragma once

/// \file
/// What a run journal hands out, as values: one entry as it goes out over SSE, and where
/// a journaled run stands. CAF-free, so `api/` can translate and show them.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "troupe/actors/run_result.hpp"

namespace troupe::actors {

/// The bytes of one entry, encoded once (by the journal) and shared, immutable, by every
/// follower and by persistence: its SSE frame and, as views, its event name and data.
struct journal_bytes {
  /// The SSE frame as a client gets it: `event:` (when named), `id:`, `data:` lines.
  std::string sse;
  /// The event name, in `sse`; empty for the closing `[DONE]`.
  std::string_view event;
  /// The data, in `sse` (or in `spilled_data` when the frame splits it over lines).
  std::string_view data;
  /// The data, when it spans lines (journal data is one-line JSON, so normally empty).
  std::string spilled_data;

  journal_bytes() = default;
  // The views point into this object's own strings: it never moves.
  journal_bytes(const journal_bytes&) = delete;
  journal_bytes& operator=(const journal_bytes&) = delete;
};

/// One entry, as it goes out over SSE. Copying one shares its bytes.
struct journal_entry {
  std::uint64_t seq = 0;
  /// Null only for the marker that tells a follower the journal has nothing more.
  std::shared_ptr<const journal_bytes> bytes;
  /// True for the last entry of the journal.
  bool last = false;

  /// The SSE event name; empty for the closing `[DONE]`.
  std::string_view event() const noexcept {
    return bytes ? bytes->event : std::string_view{};
  }
  std::string_view data() const noexcept {
    return bytes ? bytes->data : std::string_view{};
  }
  /// The SSE frame, shared (null for the end marker).
  std::shared_ptr<const std::string> frame() const noexcept {
    if (!bytes) {
      return nullptr;
    }
    return std::shared_ptr<const std::string>(bytes, &bytes->sse);
  }
  /// The memory the entry's bytes hold (what `api.journal_max_bytes` counts).
  std::size_t size_bytes() const noexcept {
    return bytes ? sizeof(journal_bytes) + bytes->sse.capacity() + bytes->spilled_data.capacity()
                 : 0;
  }
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
