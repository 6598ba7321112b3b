#include <catch2/catch.hpp>

#include "troupe/runtime/harness/task_contract.hpp"

using namespace troupe::harness;

namespace {

contract_input with_tools(std::string objective) {
  contract_input in;
  in.objective = std::move(objective);
  in.agent_tools = {"read", "write", "exec", "web_search", "plan", "finish"};
  return in;
}

} // namespace

TEST_CASE("a greeting gives a simple text contract with the default correction budget",
          "[runtime][harness][contract]") {
  const auto c = build_contract(with_tools("Hi, how are you?"));
  CHECK(c.complexity == task_complexity::simple);
  CHECK(c.mode == output_mode::text);
  CHECK(c.required_artifact_count == 0);
  CHECK_FALSE(c.require_plan);
  CHECK_FALSE(c.require_tool_evidence);
  CHECK(c.require_final_answer);
  CHECK(c.max_correction_attempts == 2);
}

TEST_CASE("a file extension or export phrase asks for a file artifact",
          "[runtime][harness][contract]") {
  for (const char* objective :
       {"Write the quarterly numbers to report.md", "Export the table to a spreadsheet",
        "Save as a .csv please", "Draw the chart as chart.png", "把结果导出为表格"}) {
    CAPTURE(objective);
    const auto c = build_contract(with_tools(objective));
    CHECK(c.expects_files());
    CHECK(c.required_artifact_count >= 1);
    CHECK(c.require_tool_evidence);
    CHECK(c.complexity != task_complexity::simple);
  }
}

TEST_CASE("every named output file counts as a required artifact", "[runtime][harness][contract]") {
  const auto c = build_contract(with_tools("Create summary.md and data.xlsx from the numbers"));
  CHECK(c.mode == output_mode::file);
  CHECK(c.required_artifact_count == 2);
  CHECK(c.requested_files == std::vector<std::string>{"summary.md", "data.xlsx"});
}

TEST_CASE("files the user reads from are inputs, not deliverables",
          "[runtime][harness][contract]") {
  auto in = with_tools("Read data.csv and tell me the average price");
  auto c = build_contract(in);
  CHECK(c.mode == output_mode::text);
  CHECK(c.required_artifact_count == 0);

  in = with_tools("Convert data.csv to data.xlsx");
  c = build_contract(in);
  CHECK(c.required_artifact_count == 1);
  CHECK(c.requested_files == std::vector<std::string>{"data.xlsx"});

  in = with_tools("What does sales.xlsx say about March?");
  in.attachments = {"uploads/sales.xlsx"};
  c = build_contract(in);
  CHECK(c.mode == output_mode::text);
  CHECK(c.complexity == task_complexity::normal);
}

TEST_CASE("a URL ending in .html is not a file deliverable", "[runtime][harness][contract]") {
  const auto c = build_contract(with_tools("Summarize https://example.com/news/today.html"));
  CHECK(c.mode == output_mode::text);
  CHECK(c.require_tool_evidence);
}

TEST_CASE("a file task that also asks for an explanation is mixed",
          "[runtime][harness][contract]") {
  const auto c = build_contract(with_tools("Save the cleaned rows as clean.csv and explain what "
                                           "you removed"));
  CHECK(c.mode == output_mode::mixed);
  CHECK(c.required_artifact_count == 1);
}

TEST_CASE("json output comes from the response format or the objective",
          "[runtime][harness][contract]") {
  auto in = with_tools("List three colours");
  in.response_format_json = true;
  CHECK(build_contract(in).mode == output_mode::json);
  CHECK(build_contract(with_tools("List three colours in JSON")).mode == output_mode::json);
  CHECK(build_contract(with_tools("用JSON格式列出三种颜色")).mode == output_mode::json);
  CHECK(build_contract(with_tools("Save the colours to colours.json")).mode == output_mode::file);
}

TEST_CASE("multi-step engineering work is complex and requires a plan when the agent has one",
          "[runtime][harness][contract]") {
  auto c = build_contract(with_tools("Fix the failing login test and run tests again"));
  CHECK(c.complexity == task_complexity::complex);
  CHECK(c.require_plan);
  CHECK(c.requires_validation_step());

  auto no_plan_tool = with_tools("Fix the failing login test");
  no_plan_tool.agent_tools = {"exec", "read"};
  c = build_contract(no_plan_tool);
  CHECK(c.complexity == task_complexity::complex);
  CHECK_FALSE(c.require_plan);

  auto sub = with_tools("Investigate why the build is slow");
  sub.sub_agent = true;
  CHECK_FALSE(build_contract(sub).require_plan);

  CHECK(build_contract(with_tools("帮我修复这个接口并部署")).require_plan);
  CHECK_FALSE(build_contract(with_tools("What is a prefix tree?")).require_plan);
}

TEST_CASE("an enumerated list of steps makes a task complex", "[runtime][harness][contract]") {
  const auto c = build_contract(
      with_tools("Please:\n1. collect the logs\n2. count the errors\n3. mail me the total"));
  CHECK(c.complexity == task_complexity::complex);
}

TEST_CASE("the tool policy allows the agent's tools and blocks forbidden ones",
          "[runtime][harness][contract]") {
  auto in = with_tools("Answer from memory, don't use web search and do not use exec");
  in.blocked_tools = {"write"};
  const auto c = build_contract(in);
  CHECK(c.tools.is_allowed("read"));
  CHECK_FALSE(c.tools.is_allowed("browser"));
  CHECK(c.tools.is_blocked("web_search"));
  CHECK(c.tools.is_blocked("exec"));
  CHECK(c.tools.is_blocked("write"));
  CHECK_FALSE(c.tools.is_blocked("read"));
}

TEST_CASE("an explicit correction budget overrides the default", "[runtime][harness][contract]") {
  auto in = with_tools("hello");
  in.max_correction_attempts = 5;
  CHECK(build_contract(in).max_correction_attempts == 5);
  in.max_correction_attempts = 0;
  CHECK(build_contract(in).max_correction_attempts == 0);
}

TEST_CASE("contract derivation is deterministic", "[runtime][harness][contract]") {
  const auto in = with_tools("Research the top 3 databases, then compare them and export a "
                             "report.html with a chart.png");
  const auto a = build_contract(in);
  const auto b = build_contract(in);
  CHECK(a.complexity == b.complexity);
  CHECK(a.mode == b.mode);
  CHECK(a.requested_files == b.requested_files);
  CHECK(a.required_artifact_count == 2);
}
