#pragma once

/// \file
/// The catalog of tools an agent may call: each tool's name, description, input JSON
/// Schema and whether calls may run in parallel. Execution arrives with the run core.

#include <string>
#include <string_view>
#include <vector>

#include "troupe/runtime/error.hpp"

namespace troupe::tools {

/// What the model is told about a tool, and how the runtime may schedule it.
struct tool_descriptor {
  /// Unique name the model calls it by: 1-64 characters of [A-Za-z0-9_-] (the rule
  /// OpenAI and Anthropic both enforce on function names).
  std::string name;
  std::string description;
  /// The JSON Schema of the arguments object, as JSON text.
  std::string input_schema = R"({"type":"object","properties":{}})";
  /// True when calls may run in parallel with other calls in the same round.
  bool concurrency_safe = false;
};

/// True when `name` is a valid tool name.
bool valid_tool_name(std::string_view name) noexcept;

/// Tools by name, in registration order.
class tool_catalog {
public:
  /// Adds a tool. Fails on an invalid or duplicate name.
  expected<void> add(tool_descriptor tool);
  /// The tool called `name`, or nullptr.
  const tool_descriptor* find(std::string_view name) const noexcept;
  const std::vector<tool_descriptor>& all() const noexcept {
    return tools_;
  }

private:
  std::vector<tool_descriptor> tools_;
};

} // namespace troupe::tools
