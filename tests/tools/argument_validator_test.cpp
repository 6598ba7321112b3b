#include <catch2/catch.hpp>

#include "troupe/tools/argument_validator.hpp"

using troupe::tools::argument_schema;
using troupe::tools::validate_arguments;

namespace {

// A write-files tool: the shape the examples in the error messages come from.
constexpr const char* files_schema = R"({
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
    "note": {"description": "free text, no type"}
  },
  "required": ["files"]
})";

std::string error_of(std::string_view arguments, std::string_view schema = files_schema) {
  auto r = validate_arguments(schema, arguments);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == troupe::errc::invalid_argument);
  return r.error().message;
}

} // namespace

TEST_CASE("arguments that match the schema pass", "[tools][arguments]") {
  CHECK(validate_arguments(files_schema, R"({"files":[{"path":"a.md"}]})"));
  CHECK(validate_arguments(files_schema, R"({"files":[{"path":"a.md","encoding":"base64",
      "mode":420.0}],"overwrite":true,"timeout":null,"note":[1,"x"]})"));
  CHECK(validate_arguments(files_schema, R"({"files":[{"path":"ä€𝄞"}],"timeout":0.5})"));
}

TEST_CASE("a missing required property is named by its path", "[tools][arguments]") {
  CHECK(error_of("{}") == "arguments.files: missing required property");
  CHECK(error_of(R"({"files":[{"encoding":"utf8"}]})") ==
        "arguments.files[0].path: missing required property");
}

TEST_CASE("a value outside the enum lists the allowed values", "[tools][arguments]") {
  CHECK(error_of(R"({"files":[{"path":"a"},{"path":"b"},{"path":"c","encoding":"utf16"}]})") ==
        R"(arguments.files[2].encoding: expected one of utf8, base64 (got "utf16"))");
  CHECK(validate_arguments(R"({"enum":[1,2,"x",null]})", "2.0"));
  CHECK_FALSE(validate_arguments(R"({"enum":[1,2]})", "3"));
}

TEST_CASE("numbers, strings and arrays are held to their bounds", "[tools][arguments]") {
  CHECK(error_of(R"({"files":[{"path":"a","mode":512}]})") ==
        "arguments.files[0].mode: must be <= 511, got 512");
  CHECK(error_of(R"({"files":[{"path":"a","mode":-1}]})") ==
        "arguments.files[0].mode: must be >= 0, got -1");
  CHECK(error_of(R"({"files":[{"path":"a"}],"timeout":0})") ==
        "arguments.timeout: must be > 0, got 0");
  CHECK(error_of(R"({"files":[{"path":""}]})") ==
        "arguments.files[0].path: must be at least 1 character(s) long, got 0");
  CHECK(error_of(R"({"files":[{"path":"ninechars"}]})") ==
        "arguments.files[0].path: must be at most 8 character(s) long, got 9");
  CHECK(error_of(R"({"files":[]})") == "arguments.files: must have at least 1 item(s), got 0");
  CHECK(error_of(R"({"files":[{"path":"a"},{"path":"b"},{"path":"c"},{"path":"d"}]})") ==
        "arguments.files: must have at most 3 item(s), got 4");
}

TEST_CASE("wrong types name what was expected and what came", "[tools][arguments]") {
  CHECK(error_of(R"({"files":"a.md"})") == "arguments.files: expected array, got string");
  CHECK(error_of(R"({"files":[{"path":"a","mode":1.5}]})") ==
        "arguments.files[0].mode: expected integer, got number 1.5");
  CHECK(error_of(R"({"files":[{"path":"a"}],"overwrite":"yes"})") ==
        "arguments.overwrite: expected boolean, got string");
  CHECK(error_of(R"({"files":[{"path":"a"}],"timeout":"10"})") ==
        "arguments.timeout: expected number or null, got string");
  CHECK(error_of(R"([1,2])") == "arguments: expected object, got array");
}

TEST_CASE("nested arrays are validated item by item", "[tools][arguments]") {
  constexpr const char* matrix = R"({"type":"object","properties":{"rows":{"type":"array",
      "items":{"type":"array","maxItems":2,"items":{"type":"integer"}}}}})";
  CHECK(validate_arguments(matrix, R"({"rows":[[1,2],[3]]})"));
  CHECK(error_of(R"({"rows":[[1,2],[3,"x"]]})", matrix) ==
        "arguments.rows[1][1]: expected integer, got string");
  CHECK(error_of(R"({"rows":[[1,2,3]]})", matrix) ==
        "arguments.rows[0]: must have at most 2 item(s), got 3");
}

TEST_CASE("an unknown property is rejected when additionalProperties is false",
          "[tools][arguments]") {
  CHECK(error_of(R"({"files":[{"path":"a","size":3}]})") ==
        "arguments.files[0].size: unknown property (allowed: path, encoding, mode)");
  CHECK(error_of(R"({"files":[{"path":"a","my key":3}]})") ==
        R"(arguments.files[0]["my key"]: unknown property (allowed: path, encoding, mode))");
  // Without additionalProperties false, extra properties pass; with a schema they are checked.
  CHECK(validate_arguments(files_schema, R"({"files":[{"path":"a"}],"extra":1})"));
  constexpr const char* map = R"({"type":"object","additionalProperties":{"type":"string"}})";
  CHECK(validate_arguments(map, R"({"a":"x"})"));
  CHECK(error_of(R"({"a":1})", map) == "arguments.a: expected string, got integer");
}

TEST_CASE("malformed JSON arguments get a clear error", "[tools][arguments]") {
  for (const char* bad : {R"({"files":[{"path":"a"})", "{files: 1}", R"({"a":1} trailing)"}) {
    CAPTURE(bad);
    CHECK_THAT(error_of(bad), Catch::StartsWith("arguments: not valid JSON ("));
  }
}

TEST_CASE("empty arguments count as an empty object", "[tools][arguments]") {
  CHECK(validate_arguments(R"({"type":"object","properties":{}})", ""));
  CHECK(validate_arguments(R"({"type":"object","properties":{}})", "  \n"));
  CHECK(error_of("   ") == "arguments.files: missing required property");
}

TEST_CASE("several problems are reported together, up to a limit", "[tools][arguments]") {
  const auto message = error_of(R"({"files":[{"mode":"x","size":1}],"overwrite":1})");
  CHECK_THAT(message, Catch::Contains("arguments.files[0].path: missing required property"));
  CHECK_THAT(message, Catch::Contains("; arguments.files[0].mode: expected integer"));
  CHECK_THAT(message, Catch::Contains("arguments.files[0].size: unknown property"));
  CHECK_THAT(message, Catch::Contains("arguments.overwrite: expected boolean, got integer"));

  std::string many = R"({"files":[)";
  for (int i = 0; i < 3; ++i) {
    many += std::string(i ? "," : "") + R"({"a":1,"b":2,"c":3,"d":4})";
  }
  many += "]}";
  const auto capped = error_of(many);
  std::size_t reported = 0;
  for (auto at = capped.find("arguments."); at != std::string::npos;
       at = capped.find("arguments.", at + 1)) {
    ++reported;
  }
  CHECK(reported == argument_schema::max_reported_errors);
}

TEST_CASE("a compiled schema is reused across calls", "[tools][arguments]") {
  auto schema = argument_schema::compile(files_schema);
  REQUIRE(schema);
  CHECK(schema->validate(R"({"files":[{"path":"a"}]})"));
  CHECK_FALSE(schema->validate(R"({"files":[]})"));
}

TEST_CASE("a broken schema is reported when compiled", "[tools][arguments]") {
  auto bad_json = argument_schema::compile("{");
  REQUIRE_FALSE(bad_json);
  CHECK_THAT(bad_json.error().message, Catch::StartsWith("tool schema is not valid JSON"));
  auto bad_type = argument_schema::compile(R"({"properties":{"a":{"type":"text"}}})");
  REQUIRE_FALSE(bad_type);
  CHECK(bad_type.error().message == "schema $.properties.a.type names unknown type 'text'");
  auto bad_bound = argument_schema::compile(R"({"minLength":"3"})");
  REQUIRE_FALSE(bad_bound);
  CHECK(bad_bound.error().message == "schema $.minLength must be a non-negative integer");
}

TEST_CASE("a count bound past 2^64 is the largest count, not undefined behaviour",
          "[tools][arguments]") {
  // As the fuzzer found it: a whole double far outside uint64 (the cast was UB).
  auto huge = argument_schema::compile(
      R"({"properties":{"s":{"type":"string","minLength":1911111111111111111111.9},)"
      R"("a":{"type":"array","maxItems":1e300}}})");
  REQUIRE(huge);
  auto short_text = huge->validate(R"({"s":"short"})");
  REQUIRE_FALSE(short_text);
  CHECK_THAT(short_text.error().message, Catch::Contains("arguments.s"));
  CHECK(huge->validate(R"({"a":[1,2,3]})"));
}
