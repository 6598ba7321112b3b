#include <catch2/catch.hpp>

#include "troupe/tools/argument_validator.hpp"
#include "troupe/tools/control_tools.hpp"

using namespace troupe::tools;

TEST_CASE("the control tools have valid names and schemas that check their arguments",
          "[tools][control]") {
  for (const auto& d : control_tool_descriptors()) {
    CHECK(valid_tool_name(d.name));
    CHECK(argument_schema::compile(d.input_schema));
    CHECK(is_control_tool(d.name));
  }
  CHECK(validate_arguments(finish_tool_descriptor().input_schema, R"({"answer":"done"})"));
  CHECK_FALSE(validate_arguments(finish_tool_descriptor().input_schema, R"({})"));
  CHECK_FALSE(validate_arguments(plan_tool_descriptor().input_schema, R"({"action":"drop"})"));
  CHECK_FALSE(is_control_tool("exec"));
}
