#include "troupe/tools/control_tools.hpp"

#include "troupe/tools/builtin_tools.hpp"

namespace troupe::tools {

const tool_descriptor& finish_tool_descriptor() {
  static const tool_descriptor d{
      "finish",
      "Ends the task with your final answer for the user. Call it once the work is done; "
      "the answer is checked before it is accepted.",
      R"({"type":"object","properties":{"answer":{"type":"string","description":)"
      R"("The complete final answer."}},"required":["answer"]})",
      false};
  return d;
}

const tool_descriptor& plan_tool_descriptor() {
  static const tool_descriptor d{
      "plan",
      "Reads or changes your plan. set/revise replace the items; update changes one item's "
      "status (pending, running, completed, blocked, failed, skipped; blocked, failed and "
      "skipped need a reason); read returns the plan. At most one item runs at a time.",
      R"({"type":"object","properties":{)"
      R"("action":{"type":"string","enum":["set","update","revise","read"]},)"
      R"("items":{"type":"array","items":{"type":"object","properties":{)"
      R"("id":{"type":"string"},"title":{"type":"string"},"detail":{"type":"string"},)"
      R"("status":{"type":"string"},"reason":{"type":"string"}}}},)"
      R"("id":{"type":"string"},"status":{"type":"string"},"reason":{"type":"string"}},)"
      R"("required":["action"]})",
      false};
  return d;
}

const tool_descriptor& sub_agent_tool_descriptor() {
  static const tool_descriptor d{
      "sub_agent",
      "Runs independent tasks as sub-agents in parallel and returns their answers in task "
      "order. mode explore may only read (read, grep, find, ls); shell may run commands "
      "(exec, read, ls). model fast uses the faster model.",
      R"({"type":"object","properties":{"tasks":{"type":"array","minItems":1,"maxItems":8,)"
      R"("items":{"type":"object","properties":{"objective":{"type":"string"},)"
      R"("mode":{"type":"string","enum":["explore","shell","general"]},)"
      R"("model":{"type":"string","enum":["default","fast"]}},"required":["objective"]}}},)"
      R"("required":["tasks"]})",
      false};
  return d;
}

std::vector<tool_descriptor> control_tool_descriptors() {
  return {finish_tool_descriptor(), plan_tool_descriptor(), sub_agent_tool_descriptor()};
}

bool is_control_tool(std::string_view name) noexcept {
  return name == "finish" || name == "plan" || name == "sub_agent";
}

std::vector<std::string> known_tool_names() {
  tool_registry builtins;
  (void)register_builtin_tools(builtins);
  std::vector<std::string> names;
  for (const auto& d : builtins.catalog().all()) {
    names.push_back(d.name);
  }
  for (const auto& d : control_tool_descriptors()) {
    names.push_back(d.name);
  }
  return names;
}

} // namespace troupe::tools
