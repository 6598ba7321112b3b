#pragma once

/// \file
/// Validation of a tool call's JSON arguments against the tool's input schema, before
/// the call runs. The error names the JSON path and what was expected, in words a model
/// can act on: `arguments.files[2].encoding: expected one of utf8, base64 (got "utf16")`.
///
/// Supported JSON Schema subset: type (object, string, number, integer, boolean, array,
/// null, or a list of them), properties, required, enum, minimum, maximum,
/// exclusiveMinimum, exclusiveMaximum, minLength, maxLength (in code points), minItems,
/// maxItems, items, additionalProperties (false, true or a schema), and OpenAPI's
/// `nullable`. Other keywords (description, default, format, anyOf, …) are ignored:
/// they never reject a call.

#include <memory>
#include <string>
#include <string_view>

#include "troupe/runtime/error.hpp"

namespace troupe::tools {

namespace detail {
struct schema_node;
} // namespace detail

/// A tool's input schema, compiled once and used for every call of the tool.
class argument_schema {
public:
  /// Most problems one validation reports; the rest are left for the next attempt.
  static constexpr std::size_t max_reported_errors = 8;

  /// Compiles a schema. Fails with invalid_argument when the schema is not JSON, not an
  /// object, or uses a supported keyword wrongly (an unknown type name, a non-numeric
  /// minimum, …), naming the keyword's place in the schema.
  static expected<argument_schema> compile(std::string_view schema_json);

  /// Checks a call's arguments. Empty or white-space arguments count as `{}` (models
  /// send "" for calls without arguments). Fails with invalid_argument: for malformed
  /// JSON, a message saying so; otherwise up to max_reported_errors problems, each
  /// `<json path>: <what was expected>`, joined by "; ".
  expected<void> validate(std::string_view arguments_json) const;

private:
  std::shared_ptr<const detail::schema_node> root_;
};

/// Compiles `schema_json` and validates `arguments_json` against it in one call. Prefer
/// a cached argument_schema for repeated calls.
expected<void> validate_arguments(std::string_view schema_json, std::string_view arguments_json);

} // namespace troupe::tools
