#include <catch2/catch.hpp>

#include "troupe/runtime/harness/plan_state.hpp"

using namespace troupe::harness;

namespace {

std::vector<plan_item_spec> three_items() {
  return {{"a", "Collect", "", std::nullopt, ""},
          {"b", "Analyze", "", std::nullopt, ""},
          {"c", "Report", "", std::nullopt, ""}};
}

} // namespace

TEST_CASE("only one plan item runs at a time", "[runtime][harness][plan]") {
  plan_state plan;
  REQUIRE(plan.set(three_items()));
  REQUIRE(plan.update("a", plan_status::running));
  auto second = plan.update("b", plan_status::running);
  REQUIRE_FALSE(second);
  CHECK(second.error().code == troupe::errc::conflict);
  CHECK_THAT(second.error().message, Catch::Contains("'a' is still running"));
  CHECK(plan.find("b")->status == plan_status::pending);

  REQUIRE(plan.update("a", plan_status::completed));
  CHECK(plan.update("b", plan_status::running));
  CHECK(plan.running()->id == "b");

  auto both = plan.set(
      {{"x", "One", "", plan_status::running, ""}, {"y", "Two", "", plan_status::running, ""}});
  REQUIRE_FALSE(both);
  CHECK_THAT(both.error().message, Catch::Contains("exactly one item may run"));
  CHECK(plan.items().size() == 3); // a failed operation leaves the plan unchanged
}

TEST_CASE("a failed plan item counts as terminal", "[runtime][harness][plan]") {
  plan_state plan;
  REQUIRE(plan.set(three_items()));
  REQUIRE(plan.update("a", plan_status::completed));
  REQUIRE(plan.update("b", plan_status::failed, "the API is down"));
  CHECK_FALSE(plan.all_terminal());
  REQUIRE(plan.update("c", plan_status::skipped, "nothing to report"));
  CHECK(is_terminal(plan_status::failed));
  CHECK(is_terminal(plan_status::skipped));
  CHECK(is_terminal(plan_status::blocked));
  CHECK_FALSE(is_terminal(plan_status::running));
  CHECK(plan.all_terminal());
  CHECK(plan.ready_for_final_answer());
}

TEST_CASE("failing, blocking or skipping a plan item needs a reason", "[runtime][harness][plan]") {
  plan_state plan;
  REQUIRE(plan.set(three_items()));
  auto r = plan.update("a", plan_status::failed);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("needs a reason"));
  CHECK(plan.find("a")->status == plan_status::pending);
}

TEST_CASE("plan operations report unknown ids and missing plans clearly",
          "[runtime][harness][plan]") {
  plan_state plan;
  auto none = plan.update("a", plan_status::completed);
  REQUIRE_FALSE(none);
  CHECK(none.error().code == troupe::errc::not_found);
  CHECK_THAT(none.error().message, Catch::Contains("no plan yet"));
  CHECK_FALSE(plan.revise(three_items()));

  REQUIRE(plan.set(three_items()));
  auto unknown = plan.update("z", plan_status::completed);
  REQUIRE_FALSE(unknown);
  CHECK_THAT(unknown.error().message, Catch::Contains("the ids are: a, b, c"));

  auto dup = plan.set({{"a", "One", "", std::nullopt, ""}, {"a", "Two", "", std::nullopt, ""}});
  REQUIRE_FALSE(dup);
  CHECK_THAT(dup.error().message, Catch::Contains("used twice"));
  auto untitled = plan.set({{"a", "  ", "", std::nullopt, ""}});
  REQUIRE_FALSE(untitled);
  CHECK_THAT(untitled.error().message, Catch::Contains("no title"));
  CHECK_FALSE(plan.set({}));
  CHECK(parse_plan_status("in_progress").value() == plan_status::running);
  CHECK_FALSE(parse_plan_status("finished-ish"));
}

TEST_CASE("plan items without ids are numbered", "[runtime][harness][plan]") {
  plan_state plan;
  REQUIRE(plan.set({{"", "First", "", std::nullopt, ""}, {"", "Second", "", std::nullopt, ""}}));
  CHECK(plan.items()[0].id == "1");
  CHECK(plan.items()[1].id == "2");
  CHECK(plan.source() == plan_source::model);
}

TEST_CASE("revising a plan keeps the status of surviving items", "[runtime][harness][plan]") {
  plan_state plan;
  REQUIRE(plan.set(three_items()));
  REQUIRE(plan.update("a", plan_status::completed));
  REQUIRE(plan.update("b", plan_status::running));
  REQUIRE(plan.revise({{"a", "Collect", "", std::nullopt, ""},
                       {"b", "Analyze more", "", std::nullopt, ""},
                       {"d", "Chart", "", std::nullopt, ""}}));
  REQUIRE(plan.items().size() == 3);
  CHECK(plan.find("a")->status == plan_status::completed);
  CHECK(plan.find("b")->status == plan_status::running);
  CHECK(plan.find("b")->title == "Analyze more");
  CHECK(plan.find("d")->status == plan_status::pending);
  CHECK(plan.find("c") == nullptr);
}

TEST_CASE("an open delivery step as the last item lets the final answer through",
          "[runtime][harness][plan]") {
  plan_state plan;
  REQUIRE(plan.set({{"work", "Do the work", "", plan_status::completed, ""},
                    {"deliver", "Deliver the answer", "", plan_status::running, ""}}));
  CHECK_FALSE(plan.all_terminal());
  CHECK(plan.ready_for_final_answer());
  REQUIRE(plan.set({{"work", "Do the work", "", plan_status::pending, ""},
                    {"deliver", "Deliver the answer", "", plan_status::pending, ""}}));
  CHECK_FALSE(plan.ready_for_final_answer());
}

TEST_CASE("a contract that requires a plan bootstraps the template", "[runtime][harness][plan]") {
  task_contract contract;
  contract.require_plan = true;
  contract.require_tool_evidence = true;
  auto plan = plan_state::bootstrap(contract);
  REQUIRE(plan.items().size() == 4);
  CHECK(plan.items()[0].id == "understand");
  CHECK(plan.items()[1].id == "execute");
  CHECK(plan.items()[2].id == "validate");
  CHECK(plan.items()[3].id == "deliver");
  CHECK(plan.source() == plan_source::harness);

  contract.require_tool_evidence = false;
  CHECK(plan_state::bootstrap(contract).items().size() == 3); // no checks, no validate step

  contract.require_plan = false;
  CHECK(plan_state::bootstrap(contract).empty());
}

TEST_CASE("the plan renders as a plan_state block", "[runtime][harness][plan]") {
  plan_state plan;
  CHECK(plan.render().empty());
  REQUIRE(plan.set(three_items()));
  REQUIRE(plan.update("a", plan_status::completed));
  REQUIRE(plan.update("b", plan_status::failed, "no data"));
  REQUIRE(plan.update("c", plan_status::running));
  const auto block = plan.render();
  CHECK_THAT(block, Catch::StartsWith("<plan_state>\n"));
  CHECK_THAT(block, Catch::EndsWith("</plan_state>"));
  CHECK_THAT(block, Catch::Contains("2 of 3 items finished; running: c"));
  CHECK_THAT(block, Catch::Contains("- [failed] b: Analyze (reason: no data)"));
  CHECK_THAT(block, Catch::Contains("- [running] c: Report"));
}
