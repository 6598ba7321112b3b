#include "troupe/net/redaction.hpp"

#include <array>
#include <cctype>

namespace troupe::net {

namespace {

char lower(char c) noexcept {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

bool contains_lowered(std::string_view haystack, std::string_view needle) noexcept {
  if (needle.size() > haystack.size()) {
    return false;
  }
  for (std::size_t i = 0; i + needle.size() <= haystack.size(); ++i) {
    std::size_t k = 0;
    while (k < needle.size() && lower(haystack[i + k]) == needle[k]) {
      ++k;
    }
    if (k == needle.size()) {
      return true;
    }
  }
  return false;
}

} // namespace

bool is_secret_header(std::string_view name) noexcept {
  // "auth" covers Authorization and Proxy-Authorization, "cookie" Set-Cookie, "key"
  // x-api-key, api-key and x-goog-api-key.
  static constexpr std::array<std::string_view, 8> words = {
      "auth", "token", "secret", "key", "cookie", "password", "session", "signature"};
  for (const auto word : words) {
    if (contains_lowered(name, word)) {
      return true;
    }
  }
  return false;
}

std::string redact_headers(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const auto newline = text.find('\n');
    const auto line = newline == std::string_view::npos ? text : text.substr(0, newline + 1);
    text.remove_prefix(line.size());
    const auto colon = line.find(':');
    // A header line has a name of token characters before its colon; the request line
    // ("GET /x HTTP/1.1") and status line have a space first.
    const auto space = line.find(' ');
    if (colon == std::string_view::npos || colon == 0 ||
        (space != std::string_view::npos && space < colon) ||
        !is_secret_header(line.substr(0, colon))) {
      out += line;
      continue;
    }
    auto end = line.size();
    while (end > colon + 1 && (line[end - 1] == '\n' || line[end - 1] == '\r')) {
      --end;
    }
    out += line.substr(0, colon + 1);
    out += ' ';
    out += redacted_value;
    out += line.substr(end);
  }
  return out;
}

} // namespace troupe::net
