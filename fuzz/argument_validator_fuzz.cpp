// Fuzzes troupe::tools::argument_schema (tools/include/troupe/tools/argument_validator.hpp):
// the schema compiler and the validation of a model's tool-call arguments.
//
// Input: one byte choosing the mode, then text.
// - modes 0-3: the text is a call's arguments, validated against a fixed schema (a
//   write-files tool that uses every supported keyword, nested arrays, a string map, and
//   the schema of the workspace tool `edit`);
// - mode 4: the text is `schema NUL arguments`; the schema is compiled, and when it
//   compiles the arguments (or, without a NUL, a few fixed documents) are validated.
// Properties checked: no crash, leak, undefined behaviour or runaway recursion; every
// failure is invalid_argument with a message; validation is repeatable (the same
// arguments give the same verdict and message twice).

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "troupe/tools/argument_validator.hpp"

namespace {

using troupe::tools::argument_schema;

void check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

constexpr std::string_view files_schema = R"({
  "type": "object",
  "properties": {
    "files": {
      "type": "array", "minItems": 1, "maxItems": 3,
      "items": {
        "type": "object",
        "properties": {
          "path": {"type": "string", "minLength": 1, "maxLength": 8},
          "encoding": {"type": "string", "enum": ["utf8", "base64"]},
          "mode": {"type": "integer", "minimum": 0, "maximum": 511}
        },
        "required": ["path"],
        "additionalProperties": false
      }
    },
    "overwrite": {"type": "boolean"},
    "timeout": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 300},
    "level": {"enum": [1, 2.5, "x", null, true]},
    "note": {"description": "free text, no type", "nullable": true}
  },
  "required": ["files"]
})";

constexpr std::string_view matrix_schema =
    R"({"type":"object","properties":{"rows":{"type":"array",
        "items":{"type":"array","maxItems":2,"items":{"type":"integer"}}}}})";

constexpr std::string_view map_schema =
    R"({"type":"object","additionalProperties":{"type":"string","maxLength":4}})";

constexpr std::string_view edit_schema =
    R"({"type":"object","properties":{"file_path":{"type":"string"},"old_string":{"type":"string","minLength":1},"new_string":{"type":"string"},"replace_all":{"type":"boolean"}},"required":["file_path","old_string","new_string"],"additionalProperties":false})";

const std::array<argument_schema, 4>& fixed_schemas() {
  static const std::array<argument_schema, 4> schemas = [] {
    auto compiled = [](std::string_view text) {
      auto s = argument_schema::compile(text);
      check(s.has_value());
      return *s;
    };
    return std::array<argument_schema, 4>{compiled(files_schema), compiled(matrix_schema),
                                          compiled(map_schema), compiled(edit_schema)};
  }();
  return schemas;
}

void validate_twice(const argument_schema& schema, std::string_view arguments) {
  const auto first = schema.validate(arguments);
  const auto second = schema.validate(arguments);
  check(first.has_value() == second.has_value());
  if (!first) {
    check(first.error().code == troupe::errc::invalid_argument);
    check(!first.error().message.empty());
    check(first.error().message == second.error().message);
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) {
    return 0;
  }
  const auto mode = data[0] % 5u;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (mode < 4) {
    validate_twice(fixed_schemas()[mode], text);
    return 0;
  }
  const auto nul = text.find('\0');
  const auto schema_text = text.substr(0, nul);
  auto schema = argument_schema::compile(schema_text);
  if (!schema) {
    check(schema.error().code == troupe::errc::invalid_argument);
    check(!schema.error().message.empty());
    return 0;
  }
  if (nul != std::string_view::npos) {
    validate_twice(*schema, text.substr(nul + 1));
  } else {
    for (const std::string_view arguments :
         {"", "{}", "[]", "null", "1.5", "\"x\"", R"({"a":1,"b":[true,null,"s"],"c":{"d":-2}})",
          R"({"files":[{"path":"a.md","mode":7}],"timeout":0.5})"}) {
      validate_twice(*schema, arguments);
    }
  }
  return 0;
}
