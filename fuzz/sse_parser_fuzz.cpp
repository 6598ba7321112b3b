// Fuzzes troupe::net::sse_parser (net/include/troupe/net/sse_parser.hpp).
//
// Input: two bytes that seed where the stream is cut into reads, then the stream itself.
// Properties checked on every input:
// - the events are the same whether the stream arrives in one read or cut into reads at
//   arbitrary places (the parser's first promise), including the `retry` field and
//   whether an unfinished event is left over;
// - with tight limits the parser fails with an error instead of growing, never delivers
//   an event larger than its bound, and stops when the callback says so.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/net/sse_parser.hpp"

namespace {

using troupe::net::sse_message;
using troupe::net::sse_parser;
using troupe::net::sse_parser_limits;

struct event_copy {
  std::string event;
  std::string data;
  std::string id;
  friend bool operator==(const event_copy&, const event_copy&) = default;
};

struct outcome {
  std::vector<event_copy> events;
  std::optional<unsigned> retry_ms;
  bool partial = false;
  bool failed = false;
};

void check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

// Feeds `text` in reads whose lengths come from a small generator seeded by `seed`.
outcome parse_in_reads(std::string_view text, std::uint32_t seed) {
  sse_parser parser;
  outcome out;
  std::uint32_t state = seed | 1u;
  while (!text.empty()) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    // Mostly short reads (they hit every boundary case), sometimes long ones.
    const std::size_t want = (state & 0x100u) ? (state % 61u) + 1u : (state % 7u) + 1u;
    const auto piece = text.substr(0, want);
    text.remove_prefix(piece.size());
    auto ok = parser.feed(piece, [&](const sse_message& m) {
      out.events.push_back({std::string(m.event), std::string(m.data), std::string(m.id)});
    });
    if (!ok) {
      out.failed = true;
      return out;
    }
  }
  out.retry_ms = parser.retry_ms();
  out.partial = parser.has_partial_event();
  return out;
}

outcome parse_whole(std::string_view text) {
  sse_parser parser;
  outcome out;
  auto ok = parser.feed(text, [&](const sse_message& m) {
    out.events.push_back({std::string(m.event), std::string(m.data), std::string(m.id)});
  });
  out.failed = !ok;
  out.retry_ms = parser.retry_ms();
  out.partial = parser.has_partial_event();
  return out;
}

// Tight limits, a callback that stops after a few events, reads of 1..16 bytes.
void parse_bounded(std::string_view text, std::uint32_t seed) {
  const sse_parser_limits limits{.max_line_bytes = 64, .max_event_bytes = 128};
  sse_parser parser(limits);
  const std::size_t stop_after = seed % 5u;
  std::size_t delivered = 0;
  bool stopped = false;
  const std::size_t read = (seed >> 3) % 16u + 1u;
  while (!text.empty() && !stopped) {
    const auto piece = text.substr(0, read);
    text.remove_prefix(piece.size());
    auto ok = parser.feed(piece, [&](const sse_message& m) -> bool {
      check(!stopped);
      check(m.data.size() <= limits.max_event_bytes);
      ++delivered;
      if (delivered == stop_after) {
        stopped = true;
        return false;
      }
      return true;
    });
    if (!ok) {
      check(ok.error().code == troupe::errc::limit_exceeded);
      return;
    }
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  if (size < 2) {
    return 0;
  }
  const std::uint32_t seed = static_cast<std::uint32_t>(bytes[0]) << 8 | bytes[1];
  const std::string_view text(reinterpret_cast<const char*>(bytes) + 2, size - 2);

  // The default limits (megabytes) are far above -max_len, so neither run fails.
  const auto whole = parse_whole(text);
  const auto split = parse_in_reads(text, seed);
  check(!whole.failed && !split.failed);
  check(whole.events == split.events);
  check(whole.retry_ms == split.retry_ms);
  check(whole.partial == split.partial);

  parse_bounded(text, seed);
  return 0;
}
