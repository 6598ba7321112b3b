#include <catch2/catch.hpp>

#include "troupe/runtime/harness/validators.hpp"

using namespace troupe::harness;

namespace {

tool_event call(std::string tool, tool_status status, std::string error = {}) {
  tool_event e;
  e.call_id = "call_" + tool;
  e.tool = std::move(tool);
  e.status = status;
  e.error = std::move(error);
  return e;
}

decision pre_final(const task_contract& c, const evidence_ledger& l, std::string_view answer,
                   const plan_state& plan = {}) {
  return validate_pre_final(c, l, plan, {answer});
}

} // namespace

TEST_CASE("a blocked tool is refused at pre_tool", "[runtime][harness][validators]") {
  task_contract c;
  c.tools.allowed = {"read", "exec"};
  c.tools.blocked = {"exec"};
  auto d = validate_pre_tool(c, "exec");
  CHECK_FALSE(d.allowed);
  CHECK(d.at == stage::pre_tool);
  CHECK(d.has(violation_code::tool_blocked_by_contract));
  CHECK(d.violations[0].level == severity::critical);

  d = validate_pre_tool(c, "browser");
  CHECK_FALSE(d.allowed);
  CHECK(d.has(violation_code::tool_not_allowed_by_contract));

  d = validate_pre_tool(c, "read");
  CHECK(d.allowed);
  CHECK(d.violations.empty());

  c.tools.allowed.clear(); // no allowed list: anything not blocked may run
  CHECK(validate_pre_tool(c, "browser").allowed);
}

TEST_CASE("a loop guard refusal is a critical pre_tool violation, its warning is not",
          "[runtime][harness][validators]") {
  task_contract c;
  loop_verdict refuse{loop_verdict::kind::repeated_call, true, "Refused: repeated"};
  auto d = validate_pre_tool(c, "read", refuse);
  CHECK_FALSE(d.allowed);
  CHECK(d.has(violation_code::tool_loop_detected));
  loop_verdict warn{loop_verdict::kind::ping_pong, false, "Warning: alternating"};
  d = validate_pre_tool(c, "read", warn);
  CHECK(d.allowed);
  CHECK(d.violations.at(0).level == severity::warning);
}

TEST_CASE("a failed tool is a warning at post_tool", "[runtime][harness][validators]") {
  evidence_ledger ledger;
  ledger.record_tool(call("web_fetch", tool_status::error, "HTTP 503 from upstream"));
  ledger.record_tool(call("read", tool_status::success));
  const auto d = validate_post_tool(ledger.tool_events());
  CHECK(d.allowed);
  REQUIRE(d.violations.size() == 1);
  CHECK(d.violations[0].code == violation_code::tool_failed);
  CHECK(d.violations[0].level == severity::warning);
  CHECK_THAT(d.violations[0].message, Catch::Contains("web_fetch"));
  CHECK_FALSE(d.required_actions().empty());
}

TEST_CASE("an empty final answer is rejected at pre_final", "[runtime][harness][validators]") {
  task_contract c;
  evidence_ledger ledger;
  for (const char* answer : {"", "   \n\t", "\xE3\x80\x80", "\xC2\xA0 "}) {
    const auto d = pre_final(c, ledger, answer);
    CHECK_FALSE(d.allowed);
    CHECK(d.at == stage::pre_final);
    CHECK(d.has(violation_code::final_answer_empty));
  }
  CHECK(pre_final(c, ledger, "Paris is the capital of France.").allowed);
}

TEST_CASE("a progress-only final answer is rejected", "[runtime][harness][validators]") {
  task_contract c;
  evidence_ledger ledger;
  for (const char* answer :
       {"I'll now run the analysis and get back to you.", "Let me search for that first.",
        "正在生成报告，请稍等。", "接下来我将查询数据库"}) {
    CAPTURE(answer);
    const auto d = pre_final(c, ledger, answer);
    CHECK_FALSE(d.allowed);
    CHECK(d.has(violation_code::final_answer_incomplete_progress));
  }
  CHECK(pre_final(c, ledger, "Here is the analysis: revenue grew 4%.").allowed);
}

TEST_CASE("a final answer that claims a file without an artifact is rejected",
          "[runtime][harness][validators]") {
  task_contract c; // a text task: the claim alone requires the artifact
  evidence_ledger ledger;
  auto d = pre_final(c, ledger, "Done! I have saved the report to report.md.");
  CHECK_FALSE(d.allowed);
  CHECK(d.has(violation_code::required_artifact_missing));
  d = pre_final(c, ledger, "报告已生成，文件名为 report.html");
  CHECK(d.has(violation_code::required_artifact_missing));

  ledger.add_artifact({"report.md", "/work/report.md", "", "", "text/markdown", 10, "call_1"});
  d = pre_final(c, ledger, "Done! I have saved the report to report.md.");
  CHECK(d.allowed);

  d = pre_final(c, ledger, "I have saved the report to report.md and the data to data.csv.");
  CHECK_FALSE(d.allowed);
  CHECK(d.has(violation_code::artifact_reference_missing));
  CHECK_THAT(d.violations.at(0).message, Catch::Contains("data.csv"));

  // Files the answer read from are not claimed as delivered.
  d = pre_final(c, ledger, "I read data.csv and saved the summary to report.md.");
  CHECK(d.allowed);
}

TEST_CASE("a file task needs its artifacts at pre_final", "[runtime][harness][validators]") {
  task_contract c;
  c.mode = output_mode::file;
  c.required_artifact_count = 2;
  evidence_ledger ledger;
  ledger.record_tool(call("write", tool_status::success));
  ledger.add_artifact({"a.md", "/w/a.md", "", "", "", 1, ""});
  auto d = pre_final(c, ledger, "Here are your files.");
  CHECK(d.has(violation_code::required_artifact_missing));
  ledger.add_artifact({"b.md", "", "", "", "", 1, ""});
  d = pre_final(c, ledger, "Here are your files.");
  CHECK_FALSE(d.has(violation_code::required_artifact_missing));
  CHECK(d.has(violation_code::artifact_reference_missing)); // b.md has no id, path or url
}

TEST_CASE("an open required plan blocks the final answer", "[runtime][harness][validators]") {
  task_contract c;
  c.require_plan = true;
  evidence_ledger ledger;
  ledger.record_tool(call("exec", tool_status::success));
  plan_state plan;
  REQUIRE(plan.set({{"a", "Work", "", std::nullopt, ""}, {"b", "Check", "", std::nullopt, ""}}));
  auto d = pre_final(c, ledger, "Here is the result.", plan);
  CHECK_FALSE(d.allowed);
  CHECK(d.has(violation_code::plan_not_terminal));
  CHECK_THAT(d.violations.at(0).message, Catch::Contains("a, b"));

  REQUIRE(plan.update("a", plan_status::completed));
  REQUIRE(plan.update("b", plan_status::failed, "checker unavailable"));
  d = pre_final(c, ledger, "Here is the result.", plan);
  CHECK_FALSE(d.has(violation_code::plan_not_terminal));
}

TEST_CASE("an untouched bootstrap plan without evidence is unproven",
          "[runtime][harness][validators]") {
  task_contract c;
  c.require_plan = true;
  const auto plan = plan_state::bootstrap(c);
  evidence_ledger ledger;
  const auto d = pre_final(c, ledger, "Here is the result.", plan);
  CHECK(d.has(violation_code::harness_plan_unproven));
  CHECK(d.has(violation_code::plan_not_terminal));
}

TEST_CASE("a tool failure without later success must be explained",
          "[runtime][harness][validators]") {
  task_contract c;
  evidence_ledger ledger;
  ledger.record_tool(call("web_search", tool_status::error, "timed out"));
  auto d = pre_final(c, ledger, "Here is the answer: 42.");
  CHECK_FALSE(d.allowed);
  CHECK(d.has(violation_code::no_successful_evidence_after_tool_failure));

  d = pre_final(c, ledger, "I could not finish: the web search timed out twice.");
  CHECK_FALSE(d.has(violation_code::no_successful_evidence_after_tool_failure));

  ledger.record_tool(call("web_search", tool_status::success));
  d = pre_final(c, ledger, "Here is the answer: 42.");
  CHECK(d.allowed);
}

TEST_CASE("a task that needs tool evidence rejects an answer without it",
          "[runtime][harness][validators]") {
  task_contract c;
  c.require_tool_evidence = true;
  evidence_ledger ledger;
  ledger.record_tool(call("plan", tool_status::success)); // bookkeeping is not evidence
  auto d = pre_final(c, ledger, "The latest price is 12.");
  CHECK_FALSE(d.allowed);
  CHECK(d.has(violation_code::tool_evidence_missing));
  // Claiming a blocker without having tried is not an excuse.
  CHECK(pre_final(c, ledger, "I can't look up prices.").has(violation_code::tool_evidence_missing));
  ledger.record_tool(call("web_search", tool_status::success));
  CHECK(pre_final(c, ledger, "The latest price is 12.").allowed);
}

TEST_CASE("json output mode rejects invalid and multiple JSON values",
          "[runtime][harness][validators]") {
  task_contract c;
  c.mode = output_mode::json;
  evidence_ledger ledger;
  CHECK(pre_final(c, ledger, R"({"colours":["red","green"]})").allowed);
  CHECK(pre_final(c, ledger, " [1,2,3]\n").allowed);
  CHECK(pre_final(c, ledger, "42").allowed);

  auto d = pre_final(c, ledger, R"(Sure! {"a":1})");
  CHECK(d.has(violation_code::json_output_invalid));
  d = pre_final(c, ledger, R"({"a":1)");
  CHECK(d.has(violation_code::json_output_invalid));
  d = pre_final(c, ledger, "```json\n{\"a\":1}\n```");
  CHECK(d.has(violation_code::json_output_invalid));
  CHECK_THAT(d.violations.at(0).message, Catch::Contains("code fence"));

  d = pre_final(c, ledger, R"({"a":1} {"b":2})");
  CHECK_FALSE(d.allowed);
  CHECK(d.has(violation_code::json_output_multiple_values));
  CHECK_FALSE(d.has(violation_code::json_output_invalid));
  d = pre_final(c, ledger, "{\"a\":1}\n[2]");
  CHECK(d.has(violation_code::json_output_multiple_values));
  d = pre_final(c, ledger, "1 2");
  CHECK(d.has(violation_code::json_output_multiple_values));
  d = pre_final(c, ledger, R"({"a":1} and more)"); // one value plus prose is not two values
  CHECK(d.has(violation_code::json_output_invalid));
  CHECK_FALSE(d.has(violation_code::json_output_multiple_values));
  d = pre_final(c, ledger, R"({"a":1} {"b":)");
  CHECK(d.has(violation_code::json_output_invalid));

  d = validate_pre_save(c, ledger, {}, {R"({"a":1} {"b":2})"});
  CHECK(d.at == stage::pre_save);
  CHECK(d.has(violation_code::json_output_multiple_values));
}

TEST_CASE("pre_save requires a file answer to reference every artifact",
          "[runtime][harness][validators]") {
  task_contract c;
  c.mode = output_mode::file;
  c.required_artifact_count = 1;
  evidence_ledger ledger;
  ledger.record_tool(call("write", tool_status::success));
  ledger.add_artifact(
      {"q3 report.md", "/w/q3 report.md", "f-123", "/public/files/f-123", "", 1, ""});
  auto d = validate_pre_save(c, ledger, {}, {"The report is ready."});
  CHECK_FALSE(d.allowed);
  CHECK(d.has(violation_code::file_output_ref_missing));
  CHECK(validate_pre_final(c, ledger, {}, {"The report is ready."}).allowed);

  d = validate_pre_save(
      c, ledger, {},
      {"The report is ready.\n\nAttachments:\n- [q3 report.md](/public/files/f-123)"});
  CHECK(d.allowed);
  d = validate_pre_save(c, ledger, {}, {"See /w/q3%20report.md"});
  CHECK(d.allowed);
}

TEST_CASE("decisions serialize codes, actions and severities for steps",
          "[runtime][harness][validators]") {
  task_contract c;
  evidence_ledger ledger;
  const auto d = pre_final(c, ledger, "");
  const auto json = d.to_json();
  CHECK_THAT(
      json,
      Catch::StartsWith(
          R"({"stage":"pre_final","allowed":false,"violation_codes":["final_answer_empty"])"));
  CHECK_THAT(json, Catch::Contains(R"("severity":"critical")"));
  const auto event = d.to_event(3);
  CHECK(event.stage == "pre_final");
  CHECK(event.violation_codes == std::vector<std::string>{"final_answer_empty"});
  CHECK(event.round == 3);
}
