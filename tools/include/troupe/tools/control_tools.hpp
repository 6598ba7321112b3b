#pragma once

/// \file
/// The control tools: tools the run actor executes itself rather than on an io
/// executor, because they act on the run (its final answer, its plan, its children).
/// Their descriptors live here so that agents and catalogs can list them like any
/// other tool.

#include <string_view>
#include <vector>

#include "troupe/tools/tool_catalog.hpp"

namespace troupe::tools {

/// `finish {answer}`: the explicit final answer; it goes through the final gate and ends
/// the run when accepted.
const tool_descriptor& finish_tool_descriptor();

/// `plan {action: set|update|revise|read, items[], id, status, reason}`: the run's plan.
const tool_descriptor& plan_tool_descriptor();

/// `sub_agent {tasks: [{objective, mode: explore|shell|general, model: default|fast}]}`:
/// runs each task as a child run in parallel and returns their answers in task order.
const tool_descriptor& sub_agent_tool_descriptor();

/// The three descriptors, in the order above.
std::vector<tool_descriptor> control_tool_descriptors();

/// Every tool name an agent may list: the built-in tools and the control tools.
std::vector<std::string> known_tool_names();

/// True for finish, plan and sub_agent.
bool is_control_tool(std::string_view name) noexcept;

} // namespace troupe::tools
