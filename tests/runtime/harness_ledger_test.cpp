#include <catch2/catch.hpp>

#include "troupe/runtime/harness/evidence_ledger.hpp"

using namespace troupe::harness;

TEST_CASE("summaries truncate on UTF-8 boundaries", "[runtime][harness][ledger]") {
  CHECK(summarize("hello", 5) == "hello");
  CHECK(summarize("hello world", 6) == "hello\xE2\x80\xA6");
  // "日本語テキスト": 7 code points of 3 bytes each.
  const std::string japanese = "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x83\x86\xE3\x82\xAD"
                               "\xE3\x82\xB9\xE3\x83\x88";
  CHECK(summarize(japanese, 3) == "\xE6\x97\xA5\xE6\x9C\xAC\xE2\x80\xA6");
  CHECK(summarize(japanese, 7) == japanese);
  CHECK(summarize("abc", 0).empty());
}

TEST_CASE("the ledger bounds argument and output summaries", "[runtime][harness][ledger]") {
  evidence_ledger ledger;
  tool_event e;
  e.tool = "exec";
  e.arguments_summary = std::string(5000, 'a');
  e.output_summary = std::string(5000, '\xC3') + "x"; // invalid bytes count one each
  ledger.record_tool(e);
  const auto& recorded = ledger.tool_events().at(0);
  CHECK(recorded.arguments_summary.size() == argument_summary_limit - 1 + 3);
  CHECK(recorded.output_summary.size() == output_summary_limit - 1 + 3);
}

TEST_CASE("failed tool calls become classified blockers", "[runtime][harness][ledger]") {
  evidence_ledger ledger;
  tool_event denied;
  denied.call_id = "c1";
  denied.tool = "read";
  denied.status = tool_status::error;
  denied.error = "open /root/x: permission denied";
  ledger.record_tool(denied);
  tool_event refused;
  refused.tool = "exec";
  refused.status = tool_status::blocked;
  refused.error = "refused";
  ledger.record_tool(refused);

  REQUIRE(ledger.blockers().size() == 2);
  CHECK(ledger.blockers()[0].kind == blocker_kind::permission_denied);
  CHECK(ledger.blockers()[0].call_id == "c1");
  CHECK(ledger.blockers()[1].kind == blocker_kind::policy_blocked);
  CHECK(ledger.tool_events()[0].failure_kind == blocker_kind::permission_denied);
  CHECK(ledger.has_terminal_blocker());
  CHECK(ledger.evidence_outcome() == outcome::blocked);
  CHECK(ledger.failure_without_later_success());
}

TEST_CASE("the ledger counts execution evidence apart from bookkeeping",
          "[runtime][harness][ledger]") {
  evidence_ledger ledger;
  for (const char* tool : {"plan", "finish", "tool_search"}) {
    tool_event e;
    e.tool = tool;
    ledger.record_tool(e);
  }
  CHECK(ledger.execution_call_count() == 0);
  CHECK_FALSE(ledger.has_successful_evidence());
  tool_event fail;
  fail.tool = "web_fetch";
  fail.status = tool_status::error;
  fail.error = "HTTP 429";
  ledger.record_tool(fail);
  tool_event ok;
  ok.tool = "web_fetch";
  ledger.record_tool(ok);
  CHECK(ledger.execution_call_count() == 2);
  CHECK(ledger.successful_execution_count() == 1);
  CHECK(ledger.failed_execution_count() == 1);
  CHECK_FALSE(ledger.failure_without_later_success());
  CHECK(ledger.evidence_outcome() == outcome::partial);
  const auto used = ledger.tools_used();
  REQUIRE(used.size() == 4);
  CHECK(used[3] == std::pair<std::string, std::size_t>{"web_fetch", 2});

  ledger.add_artifact({"a.md", "/w/a.md", "", "", "", 3, ""});
  plan_state plan;
  REQUIRE(plan.set({{"x", "X", "", std::nullopt, ""}}));
  ledger.snapshot_plan(plan, 2);
  CHECK(ledger.plan_snapshots().at(0).items.at(0).id == "x");
  const auto json = ledger.summary_json();
  CHECK_THAT(json, Catch::Contains(R"("successful_execution_calls":1)"));
  CHECK_THAT(
      json, Catch::Contains(R"("tools_used":{"plan":1,"finish":1,"tool_search":1,"web_fetch":2})"));
  CHECK_THAT(json, Catch::Contains(R"("kind":"rate_limited","terminal":false)"));
  CHECK_THAT(json, Catch::Contains(R"("artifact_count":1)"));
}

TEST_CASE("a tool status reads back from its name, and an unknown name reads as an error",
          "[runtime][harness]") {
  for (auto s :
       {tool_status::success, tool_status::error, tool_status::skipped, tool_status::blocked}) {
    CHECK(tool_status_from(to_string(s)) == s);
  }
  CHECK(tool_status_from("") == tool_status::error);
  CHECK(tool_status_from("Success") == tool_status::error);
}
