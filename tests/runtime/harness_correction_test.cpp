#include <catch2/catch.hpp>

#include "troupe/runtime/harness/correction_policy.hpp"

using namespace troupe::harness;

namespace {

decision rejected_empty() {
  task_contract c;
  evidence_ledger ledger;
  return validate_pre_final(c, ledger, {}, {""});
}

tool_event call(std::string tool, tool_status status) {
  tool_event e;
  e.tool = std::move(tool);
  e.status = status;
  return e;
}

} // namespace

TEST_CASE("corrections stop at the budget with an explicit failure message",
          "[runtime][harness][correction]") {
  correction_budget budget(2);
  evidence_ledger ledger;
  const auto rejected = rejected_empty();
  REQUIRE_FALSE(rejected.allowed);

  auto first = correct_final(budget, rejected, ledger);
  CHECK(first.retry());
  CHECK(first.attempt == 1);
  CHECK_THAT(first.prompt, Catch::Contains("The final answer is empty."));
  CHECK_THAT(first.prompt, Catch::Contains("Correction 1 of 2"));
  CHECK_THAT(first.prompt, Catch::Contains("Write the final answer"));

  auto second = correct_final(budget, rejected, ledger);
  CHECK(second.retry());
  CHECK(second.attempt == 2);

  auto third = correct_final(budget, rejected, ledger);
  CHECK_FALSE(third.retry());
  CHECK(third.prompt.empty());
  CHECK_THAT(third.failure_message, Catch::StartsWith("The run stopped"));
  CHECK_THAT(third.failure_message, Catch::Contains("after 2 correction attempt(s)"));
  CHECK_THAT(third.failure_message, Catch::Contains("final_answer_empty"));
  const auto event = third.to_event(&rejected, 4);
  CHECK_FALSE(event.sent);
  CHECK(event.violation_codes == std::vector<std::string>{"final_answer_empty"});
}

TEST_CASE("a zero budget fails the first rejected answer", "[runtime][harness][correction]") {
  correction_budget budget(0);
  evidence_ledger ledger;
  CHECK_FALSE(correct_final(budget, rejected_empty(), ledger).retry());
}

TEST_CASE("the budget resets after a successful tool round", "[runtime][harness][correction]") {
  correction_budget budget(2);
  evidence_ledger ledger;
  const auto rejected = rejected_empty();
  REQUIRE(correct_final(budget, rejected, ledger).retry());
  REQUIRE(correct_final(budget, rejected, ledger).retry());
  REQUIRE(budget.exhausted());

  const std::vector<tool_event> failed_round = {call("web_search", tool_status::error)};
  const std::vector<tool_event> bookkeeping_round = {call("plan", tool_status::success)};
  const std::vector<tool_event> good_round = {call("web_search", tool_status::error),
                                              call("read", tool_status::success)};
  CHECK_FALSE(is_successful_tool_round(failed_round));
  CHECK_FALSE(is_successful_tool_round(bookkeeping_round));
  REQUIRE(is_successful_tool_round(good_round));
  budget.reset();
  CHECK(budget.remaining() == 2);
  CHECK(correct_final(budget, rejected, ledger).retry());
}

TEST_CASE("final-gate corrections, continuation and recovery share one budget",
          "[runtime][harness][correction]") {
  correction_budget budget(2);
  evidence_ledger ledger;
  task_contract c;
  const auto progress = validate_pre_final(c, ledger, {}, {"Let me run the tests now."});
  auto continuation = correct_final(budget, progress, ledger);
  REQUIRE(continuation.retry());
  CHECK(continuation.reason == correction_reason::progress_only);
  CHECK_THAT(continuation.prompt, Catch::StartsWith("You described what you are going to do"));

  auto recovery = recover_llm_round(budget, llm_round_kind::empty_response);
  REQUIRE(recovery.retry());
  CHECK(recovery.reason == correction_reason::llm_recovery);
  CHECK(recovery.attempt == 2);

  auto spent = correct_final(budget, rejected_empty(), ledger);
  CHECK_FALSE(spent.retry());
  CHECK(spent.reason == correction_reason::final_gate);
  CHECK_FALSE(recover_llm_round(budget, llm_round_kind::truncated_content).retry());
}

TEST_CASE("a truncated tool call is classified for recovery and never executed",
          "[runtime][harness][correction]") {
  const std::vector<std::string> cut = {R"({"path":"a.txt","content":"hel)"};
  llm_round_facts facts{"length", "", cut};
  CHECK(classify_llm_round(facts) == llm_round_kind::truncated_tool_call);
  facts.finish_reason = "tool_calls"; // the provider claims completion, the JSON says otherwise
  CHECK(classify_llm_round(facts) == llm_round_kind::truncated_tool_call);

  const std::vector<std::string> whole = {R"({"path":"a.txt"})", ""};
  facts.tool_arguments = whole;
  CHECK(classify_llm_round(facts) == llm_round_kind::complete_tool_calls);
  facts.interrupted = true;
  CHECK(classify_llm_round(facts) == llm_round_kind::truncated_tool_call);
  const std::vector<std::string> not_object = {"[1,2]"};
  CHECK(classify_llm_round({"tool_calls", "", not_object}) == llm_round_kind::truncated_tool_call);

  correction_budget budget(2);
  const auto d = recover_llm_round(budget, llm_round_kind::truncated_tool_call);
  CHECK(d.retry());
  CHECK_THAT(d.prompt, Catch::Contains("was not executed"));
  CHECK(budget.used() == 1);
}

TEST_CASE("LLM rounds are classified as final, empty, truncated, filtered or interrupted",
          "[runtime][harness][correction]") {
  CHECK(classify_llm_round({"stop", "Paris."}) == llm_round_kind::final_candidate);
  CHECK(classify_llm_round({"", "Paris."}) == llm_round_kind::final_candidate);
  CHECK(classify_llm_round({"stop", "  \n"}) == llm_round_kind::empty_response);
  CHECK(classify_llm_round({"length", "Paris is the cap"}) == llm_round_kind::truncated_content);
  CHECK(classify_llm_round({"max_tokens", "Paris is"}) == llm_round_kind::truncated_content);
  CHECK(classify_llm_round({"content_filter", ""}) == llm_round_kind::content_filtered);
  CHECK(classify_llm_round({"SAFETY", "partial"}) == llm_round_kind::content_filtered);
  llm_round_facts broken{"", "Paris is", {}, true};
  CHECK(classify_llm_round(broken) == llm_round_kind::provider_interrupted);
}

TEST_CASE("a content-filtered round fails closed without spending budget",
          "[runtime][harness][correction]") {
  correction_budget budget(2);
  const auto d = recover_llm_round(budget, llm_round_kind::content_filtered);
  CHECK_FALSE(d.retry());
  CHECK_THAT(d.failure_message, Catch::Contains("content filter"));
  CHECK(budget.used() == 0);
}
