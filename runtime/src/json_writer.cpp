#include "troupe/runtime/json_writer.hpp"

#include <cassert>
#include <charconv>
#include <cmath>

namespace troupe {

namespace {

constexpr char hex_digits[] = "0123456789abcdef";

// Length of the valid UTF-8 sequence starting at text[i], or 0 if it is invalid.
std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  std::size_t length = 0;
  std::uint32_t min_code = 0;
  if (lead < 0x80) {
    return 1;
  } else if ((lead & 0xE0) == 0xC0) {
    length = 2;
    min_code = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3;
    min_code = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4;
    min_code = 0x10000;
  } else {
    return 0;
  }
  if (i + length > text.size()) {
    return 0;
  }
  std::uint32_t code = lead & (0x7Fu >> length);
  for (std::size_t k = 1; k < length; ++k) {
    const auto byte = static_cast<unsigned char>(text[i + k]);
    if ((byte & 0xC0) != 0x80) {
      return 0;
    }
    code = (code << 6) | (byte & 0x3Fu);
  }
  if (code < min_code || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
    return 0;
  }
  return length;
}

} // namespace

void append_json_string(std::string& out, std::string_view text) {
  out.reserve(out.size() + text.size() + 2);
  out.push_back('"');
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      // Copy the longest run of plain ASCII at once.
      std::size_t j = i + 1;
      while (j < text.size()) {
        const auto d = static_cast<unsigned char>(text[j]);
        if (d < 0x20 || d >= 0x80 || d == '"' || d == '\\') {
          break;
        }
        ++j;
      }
      out.append(text.substr(i, j - i));
      i = j;
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        ++i;
        continue;
      case '\\':
        out += "\\\\";
        ++i;
        continue;
      case '\n':
        out += "\\n";
        ++i;
        continue;
      case '\r':
        out += "\\r";
        ++i;
        continue;
      case '\t':
        out += "\\t";
        ++i;
        continue;
      default:
        break;
    }
    if (c < 0x20) {
      out += "\\u00";
      out.push_back(hex_digits[c >> 4]);
      out.push_back(hex_digits[c & 0xF]);
      ++i;
      continue;
    }
    const auto length = utf8_sequence_length(text, i);
    if (length == 0) {
      out += "\xEF\xBF\xBD"; // U+FFFD replacement character
      ++i;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  out.push_back('"');
}

void json_writer::separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_element_.empty()) {
    if (has_element_.back()) {
      out_.push_back(',');
    }
    has_element_.back() = true;
  }
}

json_writer& json_writer::begin_object() {
  separate();
  out_.push_back('{');
  has_element_.push_back(false);
  return *this;
}

json_writer& json_writer::end_object() {
  assert(!has_element_.empty() && !after_key_);
  has_element_.pop_back();
  out_.push_back('}');
  return *this;
}

json_writer& json_writer::begin_array() {
  separate();
  out_.push_back('[');
  has_element_.push_back(false);
  return *this;
}

json_writer& json_writer::end_array() {
  assert(!has_element_.empty() && !after_key_);
  has_element_.pop_back();
  out_.push_back(']');
  return *this;
}

json_writer& json_writer::key(std::string_view name) {
  separate();
  append_json_string(out_, name);
  out_.push_back(':');
  after_key_ = true;
  return *this;
}

json_writer& json_writer::value(std::string_view text) {
  separate();
  append_json_string(out_, text);
  return *this;
}

json_writer& json_writer::value(bool flag) {
  separate();
  out_ += flag ? "true" : "false";
  return *this;
}

json_writer& json_writer::value(std::nullptr_t) {
  separate();
  out_ += "null";
  return *this;
}

json_writer& json_writer::value(double number) {
  separate();
  if (!std::isfinite(number)) {
    out_ += "null"; // JSON has no NaN or infinity
    return *this;
  }
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, number);
  out_.append(buffer, result.ptr);
  return *this;
}

json_writer& json_writer::integer(std::int64_t number) {
  separate();
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, number);
  out_.append(buffer, result.ptr);
  return *this;
}

json_writer& json_writer::unsigned_integer(std::uint64_t number) {
  separate();
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, number);
  out_.append(buffer, result.ptr);
  return *this;
}

json_writer& json_writer::raw(std::string_view json) {
  separate();
  out_.append(json);
  return *this;
}

} // namespace troupe
