#pragma once

/// \file
/// Two small text scanners the script parser and the answer planner share. Private to
/// troupe_mock.

#include <charconv>
#include <optional>
#include <string_view>
#include <vector>

namespace troupe::mock::detail {

/// `text` as an unsigned decimal number, or nothing when it is empty or not all digits.
inline std::optional<unsigned> parse_unsigned(std::string_view text) {
  unsigned value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || ptr != text.data() + text.size() || text.empty()) {
    return std::nullopt;
  }
  return value;
}

/// The pieces of `text` between occurrences of `sep` (empty pieces kept).
inline std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  for (;;) {
    const auto at = text.find(sep);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) {
      return parts;
    }
    text.remove_prefix(at + 1);
  }
}

} // namespace troupe::mock::detail
