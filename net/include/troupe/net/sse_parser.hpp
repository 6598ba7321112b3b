#pragma once

/// \file
/// An incremental Server-Sent Events parser (the client side; `sse.hpp` holds the
/// server's encoder). Bytes may arrive split at any point; lines end in LF, CRLF or CR;
/// comments, multi-line data, `event`, `id` and `retry` follow the WHATWG rules. A line
/// or event longer than its bound is an error, never unbounded memory.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "troupe/runtime/error.hpp"

namespace troupe::net {

/// Bounds of one parser.
struct sse_parser_limits {
  /// Longest line accepted; a provider that never sends a newline is cut off here.
  std::size_t max_line_bytes = 4 * 1024 * 1024;
  /// Largest accumulated `data` of one event.
  std::size_t max_event_bytes = 16 * 1024 * 1024;
};

/// One dispatched event. The views are valid until the next call to `feed`.
struct sse_message {
  /// The `event` field, or empty (the spec's default type "message").
  std::string_view event;
  /// The data lines joined by "\n".
  std::string_view data;
  /// The last event id seen so far (it persists across events, as the spec says).
  std::string_view id;
};

/// The parser. Feed it bytes as they arrive; it calls back once per complete event.
class sse_parser {
public:
  sse_parser() = default;
  explicit sse_parser(sse_parser_limits limits) : limits_(limits) {}

  /// Parses `bytes`, calling `on_event(const sse_message&)` for every event completed by
  /// them. `on_event` may return void, or bool where false stops parsing (the rest of
  /// `bytes` is dropped). Fails with `limit_exceeded` when a bound is crossed; events
  /// completed before that have been delivered.
  template <class OnEvent> expected<void> feed(std::string_view bytes, OnEvent&& on_event);

  /// The last `retry` field, in milliseconds.
  std::optional<unsigned> retry_ms() const noexcept {
    return retry_ms_;
  }
  /// The last `id` field read, whether or not an event was dispatched after it (what a
  /// reconnection sends as `Last-Event-ID`).
  std::string_view last_event_id() const noexcept {
    return id_;
  }
  /// True when bytes of an unfinished event are buffered (e.g. a stream cut mid-event).
  bool has_partial_event() const noexcept {
    return !line_.empty() || has_data_ || !event_.empty();
  }

private:
  enum class line_result { none, dispatch, error };
  // Handles one complete line (without its terminator).
  line_result take_line(std::string_view line);
  sse_message current() const noexcept {
    return {event_, data_, id_};
  }
  void reset_event() noexcept {
    data_.clear();
    event_.clear();
    has_data_ = false;
  }

  sse_parser_limits limits_;
  std::string line_;  // an unfinished line carried over from the previous feed
  std::string data_;  // data lines of the event being read
  std::string event_; // event field of the event being read
  std::string id_;
  std::optional<unsigned> retry_ms_;
  bool has_data_ = false;
  bool skip_lf_ = false; // the last feed ended in CR: a leading LF belongs to it
  bool bom_checked_ = false;
  std::string error_;
};

namespace detail {
/// The position of the first CR or LF in `text`, or npos.
std::size_t find_line_end(std::string_view text) noexcept;
} // namespace detail

template <class OnEvent>
expected<void> sse_parser::feed(std::string_view bytes, OnEvent&& on_event) {
  auto deliver = [&]() -> bool {
    if constexpr (std::is_same_v<decltype(on_event(current())), bool>) {
      const bool go_on = on_event(current());
      reset_event();
      return go_on;
    } else {
      on_event(current());
      reset_event();
      return true;
    }
  };
  if (!bom_checked_ && !bytes.empty()) {
    // A UTF-8 byte order mark may start the stream; it is not part of the first field.
    constexpr std::string_view bom = "\xEF\xBB\xBF";
    const auto have = line_.size() + bytes.size();
    if (have < bom.size()) {
      if (bom.starts_with(line_ + std::string(bytes))) {
        line_.append(bytes);
        return {};
      }
    }
    bom_checked_ = true;
    if (line_.empty() && bytes.starts_with(bom)) {
      bytes.remove_prefix(bom.size());
    } else if (!line_.empty()) {
      std::string joined = line_ + std::string(bytes);
      line_.clear();
      if (std::string_view(joined).starts_with(bom)) {
        joined.erase(0, bom.size());
      }
      return feed(std::string_view(joined), std::forward<OnEvent>(on_event));
    }
  }
  if (skip_lf_ && !bytes.empty()) {
    if (bytes.front() == '\n') {
      bytes.remove_prefix(1);
    }
    skip_lf_ = false;
  }
  while (!bytes.empty()) {
    const auto end = detail::find_line_end(bytes);
    if (end == std::string_view::npos) {
      if (line_.size() + bytes.size() > limits_.max_line_bytes) {
        line_.clear();
        return fail(errc::limit_exceeded,
                    "SSE line longer than " + std::to_string(limits_.max_line_bytes) + " bytes");
      }
      line_.append(bytes);
      return {};
    }
    line_result r;
    if (line_.empty()) {
      r = take_line(bytes.substr(0, end));
    } else {
      if (line_.size() + end > limits_.max_line_bytes) {
        line_.clear();
        return fail(errc::limit_exceeded,
                    "SSE line longer than " + std::to_string(limits_.max_line_bytes) + " bytes");
      }
      line_.append(bytes.substr(0, end));
      r = take_line(line_);
      line_.clear();
    }
    const bool cr = bytes[end] == '\r';
    bytes.remove_prefix(end + 1);
    if (cr) {
      if (bytes.empty()) {
        skip_lf_ = true;
      } else if (bytes.front() == '\n') {
        bytes.remove_prefix(1);
      }
    }
    if (r == line_result::error) {
      reset_event();
      return fail(errc::limit_exceeded, error_);
    }
    if (r == line_result::dispatch && !deliver()) {
      return {};
    }
  }
  return {};
}

} // namespace troupe::net
