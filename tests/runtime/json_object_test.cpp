#include <catch2/catch.hpp>

#include "troupe/runtime/json_object.hpp"

using namespace troupe;

TEST_CASE("a json object reads typed fields and names the field of a wrong one",
          "[runtime][json_object]") {
  auto o = json_object::parse(R"({"name":"ann","n":3,"whole":4.0,"half":1.5,"on":true,)"
                              R"("tags":["a","b"],"mixed":["a",1],"none":null})");
  REQUIRE(o);
  CHECK(o->text("name").value() == std::optional<std::string>("ann"));
  CHECK(o->required_text("name").value() == "ann");
  CHECK(o->integer("n").value() == std::optional<std::int64_t>(3));
  CHECK(o->integer("whole").value() == std::optional<std::int64_t>(4));
  CHECK(o->integer("half").error().message == "half: must be an integer");
  CHECK(o->boolean("on").value() == std::optional<bool>(true));
  CHECK(o->text_list("tags").value() == std::vector<std::string>{"a", "b"});
  CHECK(o->text_list("mixed").error().message == "mixed[1]: must be a string");
  CHECK(o->text("n").error().message == "n: must be a string");
  CHECK(o->text("absent").value() == std::nullopt);
  CHECK(o->required_text("absent").error().message == "absent: is required");
  // Null is a value of the wrong type unless the options say it is absence.
  CHECK(o->has("none"));
  CHECK(o->text("none").error().message == "none: must be a string");
  CHECK(o->keys().size() == 8);
  CHECK(o->keys().front() == "name");
}

TEST_CASE("tool-style options: a prefix, null as absent and an empty text as {}",
          "[runtime][json_object]") {
  json_object_options options;
  options.subject = "arguments";
  options.prefix = "arguments.";
  options.empty_is_object = true;
  options.null_is_absent = true;
  auto empty = json_object::parse("", options);
  REQUIRE(empty);
  CHECK(empty->keys().empty());
  auto o = json_object::parse(R"({"path":null,"n":"x","big":1e300})", options);
  REQUIRE(o);
  CHECK_FALSE(o->has("path"));
  CHECK(o->text("path").value() == std::nullopt);
  CHECK(o->integer("n").error().message == "arguments.n: must be an integer");
  // A whole double far outside int64 is refused, not cast.
  CHECK(o->integer("big").error().message == "arguments.big: must be an integer");
  CHECK(json_object::parse("[1]", options).error().message == "arguments: must be a JSON object");
  CHECK_THAT(json_object::parse("{", options).error().message,
             Catch::StartsWith("arguments: is not valid JSON"));
  // Without empty_is_object an empty text is not JSON.
  CHECK_THAT(json_object::parse("").error().message, Catch::StartsWith("body: is not valid JSON"));
}
