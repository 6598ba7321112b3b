// The plan tool: read, set, revise or update the run's plan. It is executed inside the
// run actor (it touches only the plan), not on the io executor.

#include <string>
#include <utility>
#include <vector>

#include "run_state.hpp"
#include "troupe/runtime/json_object.hpp"
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
  auto invalid = [](const error& e) { return tools::tool_failure("invalid_arguments", e.message); };
  auto args = json_object::parse(arguments, json_object_options::tool_arguments());
  if (!args) {
    return invalid(args.error());
  }
  auto action = args->required_text("action");
  if (!action) {
    return invalid(action.error());
  }
  // A text field of `o`, "" when absent; its problem (a wrong type) lands in `bad`.
  std::optional<error> bad;
  auto text = [&bad](const json_object& o, std::string_view key) {
    auto v = o.text(key);
    if (!v) {
      bad = bad.value_or(v.error());
      return std::string();
    }
    return v->value_or(std::string());
  };
  expected<void> applied;
  if (*action == "read") {
    return {true, plan_json(plan), {}, {}};
  }
  if (*action == "set" || *action == "revise") {
    if (!args->has("items")) {
      return tools::tool_failure("invalid_arguments",
                                 "arguments.items: is required for set and revise");
    }
    auto items = args->objects("items");
    if (!items) {
      return invalid(items.error());
    }
    std::vector<harness::plan_item_spec> specs;
    for (const auto& item : *items) {
      harness::plan_item_spec s;
      s.id = text(item, "id");
      s.title = text(item, "title");
      s.detail = text(item, "detail");
      s.reason = text(item, "reason");
      if (auto status = text(item, "status"); !status.empty()) {
        auto parsed = harness::parse_plan_status(status);
        if (!parsed) {
          return invalid(parsed.error());
        }
        s.status = *parsed;
      }
      specs.push_back(std::move(s));
    }
    if (bad) {
      return invalid(*bad);
    }
    applied = *action == "set" ? plan.set(std::move(specs)) : plan.revise(std::move(specs));
  } else if (*action == "update") {
    auto status = harness::parse_plan_status(text(*args, "status"));
    const auto id = text(*args, "id");
    const auto reason = text(*args, "reason");
    if (bad) {
      return invalid(*bad);
    }
    if (!status) {
      return invalid(status.error());
    }
    applied = plan.update(id, *status, reason);
  } else {
    return tools::tool_failure("invalid_arguments",
                               "arguments.action: must be set, update, revise or read");
  }
  if (!applied) {
    return invalid(applied.error());
  }
  return {true, plan_json(plan), {}, {}};
}

} // namespace troupe::actors::detail
