#pragma once

/// \file
/// Reading a JSON object field by field, with problems that name the field: the one
/// reader behind API request bodies ("name: is required"), tool call arguments
/// ("arguments.path: must be a string") and the run's own looks into a call's arguments.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <simdjson.h>

#include "troupe/runtime/error.hpp"

namespace troupe {

/// How a `json_object` reads its text.
struct json_object_options {
  /// What the text is, in problems with the whole text ("arguments: is not valid JSON").
  std::string subject = "body";
  /// Put before a field's name in problems ("arguments." for tool arguments).
  std::string prefix;
  /// An empty text reads as `{}` (tool arguments of a call without any).
  bool empty_is_object = false;
  /// A field set to null reads as absent (tools); else null is a value of the wrong type.
  bool null_is_absent = false;

  /// A tool call's arguments: "arguments.path: …", an empty text is `{}`, null is absent.
  static json_object_options tool_arguments();
};

/// A parsed JSON object. Getters answer nullopt for an absent field and an
/// `invalid_argument` error naming the field for a value of the wrong type.
class json_object {
public:
  /// Parses `text`, which must hold a JSON object.
  static expected<json_object> parse(std::string_view text, json_object_options options = {});

  /// The field's value (null included, unless `null_is_absent`).
  std::optional<simdjson::dom::element> element(std::string_view key) const;
  bool has(std::string_view key) const {
    return element(key).has_value();
  }
  /// The object's field names in document order.
  std::vector<std::string_view> keys() const;

  expected<std::optional<std::string>> text(std::string_view key) const;
  /// A string that must be present (and, when `non_empty`, not "").
  expected<std::string> required_text(std::string_view key, bool non_empty = false) const;
  /// An integer (a JSON number without a fraction, `3.0` included).
  expected<std::optional<std::int64_t>> integer(std::string_view key) const;
  expected<std::optional<bool>> boolean(std::string_view key) const;
  /// An array of strings (empty when absent).
  expected<std::vector<std::string>> text_list(std::string_view key) const;
  /// A nested object (nullopt when absent), read as this object is ("stream_options.x").
  expected<std::optional<json_object>> object(std::string_view key) const;
  /// An array of objects (empty when absent), each read as this object is, its problems
  /// named by place ("arguments.tasks[2].mode: must be a string").
  expected<std::vector<json_object>> objects(std::string_view key) const;

  /// An `invalid_argument` error "<prefix><key>: <problem>".
  tl::unexpected<error> problem(std::string_view key, std::string_view what) const;

private:
  json_object() = default;
  // The parser owns the document the object points into; the objects of an array share it.
  std::shared_ptr<simdjson::dom::parser> parser_;
  simdjson::dom::object object_;
  json_object_options options_;
};

} // namespace troupe
