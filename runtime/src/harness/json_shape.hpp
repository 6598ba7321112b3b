#pragma once

/// \file
/// How many JSON values a text holds, for the json output gate and the outcome
/// classifier. Private to runtime/src/harness.

#include <string>
#include <string_view>

namespace troupe::harness::detail {

enum class json_shape {
  /// Not JSON (or a JSON value followed by text that is not JSON).
  invalid,
  /// Exactly one JSON value, optionally surrounded by white space.
  single,
  /// Two or more JSON values one after another ("{}{}", "1 2").
  multiple,
};

/// The shape of `text`. `reason` receives the parser's words for an invalid text.
json_shape json_shape_of(std::string_view text, std::string* reason = nullptr);

/// `text` without a surrounding Markdown code fence (```json … ```), if it has one.
std::string_view strip_code_fence(std::string_view text) noexcept;

} // namespace troupe::harness::detail
