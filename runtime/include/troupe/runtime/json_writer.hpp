#pragma once

/// \file
/// A small streaming JSON writer. troupe parses JSON with simdjson and writes it with
/// this: no DOM, no allocation beyond the output string, correct escaping.

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace troupe {

/// Appends `text` to `out` as a JSON string literal (with quotes), escaping control
/// characters, quotes and backslashes. Invalid UTF-8 bytes are replaced by U+FFFD so the
/// output is always valid JSON.
void append_json_string(std::string& out, std::string_view text);

/// Builds one JSON document into a string. Commas are inserted automatically; the caller
/// is responsible for balancing begin/end calls (checked by assert in debug builds).
///
///     json_writer w;
///     w.begin_object().key("error").begin_object()
///      .key("code").value("not_found").end_object().end_object();
class json_writer {
public:
  json_writer() = default;
  explicit json_writer(std::string buffer) : out_(std::move(buffer)) {
    out_.clear();
  }

  json_writer& begin_object();
  json_writer& end_object();
  json_writer& begin_array();
  json_writer& end_array();
  /// Writes an object key; the next call writes its value.
  json_writer& key(std::string_view name);
  json_writer& value(std::string_view text);
  json_writer& value(const char* text) {
    return value(std::string_view{text});
  }
  json_writer& value(bool flag);
  json_writer& value(std::nullptr_t);
  json_writer& value(double number);
  template <class Int>
  requires(std::is_integral_v<Int> && !std::is_same_v<Int, bool>) json_writer& value(Int number) {
    if constexpr (std::is_signed_v<Int>) {
      return integer(static_cast<std::int64_t>(number));
    } else {
      return unsigned_integer(static_cast<std::uint64_t>(number));
    }
  }
  /// Inserts already-serialized JSON (trusted to be valid) as the next value.
  json_writer& raw(std::string_view json);

  /// The document so far.
  const std::string& str() const& noexcept {
    return out_;
  }
  std::string str() && noexcept {
    return std::move(out_);
  }

private:
  json_writer& integer(std::int64_t number);
  json_writer& unsigned_integer(std::uint64_t number);
  void separate();

  std::string out_;
  // One entry per open container: true once it has at least one element.
  std::vector<bool> has_element_;
  bool after_key_ = false;
};

} // namespace troupe
