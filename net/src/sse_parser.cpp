#include "troupe/net/sse_parser.hpp"

#include <charconv>
#include <cstring>

namespace troupe::net {

namespace detail {

std::size_t find_line_end(std::string_view text) noexcept {
  const auto* begin = text.data();
  const auto* lf = static_cast<const char*>(std::memchr(begin, '\n', text.size()));
  const auto span = lf ? static_cast<std::size_t>(lf - begin) : text.size();
  const auto* cr = static_cast<const char*>(std::memchr(begin, '\r', span));
  if (cr) {
    return static_cast<std::size_t>(cr - begin);
  }
  return lf ? span : std::string_view::npos;
}

} // namespace detail

sse_parser::line_result sse_parser::take_line(std::string_view line) {
  if (line.empty()) {
    // Blank line: dispatch. An event without data is not dispatched (WHATWG), but its
    // fields are reset.
    if (!has_data_) {
      reset_event();
      return line_result::none;
    }
    return line_result::dispatch;
  }
  if (line.front() == ':') {
    return line_result::none; // comment, e.g. a keep-alive
  }
  std::string_view field = line;
  std::string_view value;
  if (const auto colon = line.find(':'); colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') {
      value.remove_prefix(1);
    }
  }
  if (field == "data") {
    const auto grown = data_.size() + value.size() + (has_data_ ? 1 : 0);
    if (grown > limits_.max_event_bytes) {
      error_ = "SSE event data larger than " + std::to_string(limits_.max_event_bytes) + " bytes";
      return line_result::error;
    }
    if (has_data_) {
      data_.push_back('\n');
    }
    data_.append(value);
    has_data_ = true;
  } else if (field == "event") {
    event_.assign(value);
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) {
      id_.assign(value);
    }
  } else if (field == "retry") {
    unsigned ms = 0;
    const auto* first = value.data();
    const auto* last = value.data() + value.size();
    const auto [ptr, ec] = std::from_chars(first, last, ms);
    if (ec == std::errc{} && ptr == last && !value.empty()) {
      retry_ms_ = ms;
    }
  }
  // Unknown fields are ignored.
  return line_result::none;
}

} // namespace troupe::net
