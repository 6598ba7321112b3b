#include "harness/json_shape.hpp"

#include <algorithm>

#include <simdjson.h>

#include "harness/text.hpp"

namespace troupe::harness::detail {

json_shape json_shape_of(std::string_view text, std::string* reason) {
  const auto trimmed = trim(text);
  if (trimmed.empty()) {
    if (reason != nullptr) {
      *reason = "the text is empty";
    }
    return json_shape::invalid;
  }
  simdjson::dom::parser parser;
  const simdjson::padded_string buffer(trimmed);
  auto single = parser.parse(buffer);
  if (single.error() == simdjson::SUCCESS) {
    return json_shape::single;
  }
  // A second value after the first fails the one-document parse; parse_many tells
  // "two values" apart from "one value and garbage".
  simdjson::dom::parser many_parser;
  simdjson::dom::document_stream stream;
  const auto batch = std::max<std::size_t>(trimmed.size() + 64, 1024);
  if (many_parser.parse_many(buffer, batch).get(stream) == simdjson::SUCCESS) {
    std::size_t values = 0;
    bool clean = true;
    for (auto doc : stream) {
      if (doc.error() != simdjson::SUCCESS) {
        clean = false;
        break;
      }
      ++values;
    }
    if (clean && values >= 2 && stream.truncated_bytes() == 0) {
      return json_shape::multiple;
    }
  }
  if (reason != nullptr) {
    *reason = simdjson::error_message(single.error());
  }
  return json_shape::invalid;
}

std::string_view strip_code_fence(std::string_view text) noexcept {
  auto body = trim(text);
  if (!body.starts_with("```") || body.size() < 6 || !body.ends_with("```")) {
    return text;
  }
  body.remove_suffix(3);
  const auto newline = body.find('\n');
  if (newline == std::string_view::npos) {
    return text;
  }
  // The info string after the opening fence ("json") ends at the first newline.
  return body.substr(newline + 1);
}

} // namespace troupe::harness::detail
