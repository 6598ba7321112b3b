// The plan tool: read, set, revise or update the run's plan. It is executed inside the
// run actor (it touches only the plan), not on the io executor.

#include <string>
#include <utility>
#include <vector>

#include <simdjson.h>

#include "run_state.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::actors::detail {

std::string plan_json(const harness::plan_state& plan) {
  json_writer w;
  w.begin_object().key("ok").value(true).key("plan").begin_array();
  for (const auto& item : plan.items()) {
    w.begin_object().key("id").value(item.id).key("title").value(item.title);
    w.key("status").value(harness::to_string(item.status));
    if (!item.reason.empty()) {
      w.key("reason").value(item.reason);
    }
    w.end_object();
  }
  w.end_array().end_object();
  return std::move(w).str();
}

tools::tool_result run_plan_tool(harness::plan_state& plan, std::string_view arguments) {
  simdjson::dom::parser parser;
  simdjson::padded_string buffer(arguments);
  simdjson::dom::element root;
  if (parser.parse(buffer).get(root) != simdjson::SUCCESS) {
    return tools::tool_failure("invalid_arguments", "the arguments are not valid JSON");
  }
  std::string_view action;
  if (root["action"].get_string().get(action) != simdjson::SUCCESS) {
    return tools::tool_failure("invalid_arguments", "action is required");
  }
  auto text = [&](simdjson::dom::element e, std::string_view key) {
    std::string_view v;
    return e[key].get_string().get(v) == simdjson::SUCCESS ? std::string(v) : std::string();
  };
  expected<void> applied;
  if (action == "read") {
    return {true, plan_json(plan), {}, {}};
  }
  if (action == "set" || action == "revise") {
    simdjson::dom::array items;
    if (root["items"].get_array().get(items) != simdjson::SUCCESS) {
      return tools::tool_failure("invalid_arguments", "items is required for set and revise");
    }
    std::vector<harness::plan_item_spec> specs;
    for (auto item : items) {
      harness::plan_item_spec s;
      s.id = text(item, "id");
      s.title = text(item, "title");
      s.detail = text(item, "detail");
      s.reason = text(item, "reason");
      if (auto status = text(item, "status"); !status.empty()) {
        auto parsed = harness::parse_plan_status(status);
        if (!parsed) {
          return tools::tool_failure("invalid_arguments", parsed.error().message);
        }
        s.status = *parsed;
      }
      specs.push_back(std::move(s));
    }
    applied = action == "set" ? plan.set(std::move(specs)) : plan.revise(std::move(specs));
  } else if (action == "update") {
    auto status = harness::parse_plan_status(text(root, "status"));
    if (!status) {
      return tools::tool_failure("invalid_arguments", status.error().message);
    }
    applied = plan.update(text(root, "id"), *status, text(root, "reason"));
  } else {
    return tools::tool_failure("invalid_arguments", "action must be set, update, revise or read");
  }
  if (!applied) {
    return tools::tool_failure("invalid_arguments", applied.error().message);
  }
  return {true, plan_json(plan), {}, {}};
}

} // namespace troupe::actors::detail
