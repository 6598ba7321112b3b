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
  const auto options = json_object_options::tool_arguments();
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

TEST_CASE("an array of objects reads each as an object sharing the document, its problems "
          "named by place",
          "[runtime][json_object]") {
  std::vector<json_object> tasks;
  {
    // The array's objects outlive the object they came from: they share its parser.
    auto o = json_object::parse(R"({"tasks":[{"objective":"a"},{"objective":"b","mode":"x"}]})",
                                json_object_options::tool_arguments());
    REQUIRE(o);
    tasks = o->objects("tasks").value();
  }
  REQUIRE(tasks.size() == 2);
  CHECK(tasks[1].text("objective").value() == std::optional<std::string>("b"));
  CHECK(tasks[0].text("mode").value() == std::nullopt);
  CHECK(tasks[1].integer("mode").error().message == "arguments.tasks[1].mode: must be an integer");
  auto o = json_object::parse(R"({"a":[{}, 3],"b":{"on":1},"c":[]})");
  REQUIRE(o);
  auto b = o->object("b").value();
  REQUIRE(b);
  CHECK(b->boolean("on").error().message == "b.on: must be true or false");
  CHECK(o->object("c").error().message == "c: must be an object");
  CHECK(o->object("absent").value() == std::nullopt);
  CHECK(o->objects("a").error().message == "a[1]: must be an object");
  CHECK(o->objects("b").error().message == "b: must be an array of objects");
  CHECK(o->objects("c").value().empty());
  CHECK(o->objects("absent").value().empty());
}
