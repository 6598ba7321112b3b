#include "troupe/tools/tool_catalog.hpp"

#include <fmt/format.h>

namespace troupe::tools {

bool valid_tool_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 64) {
    return false;
  }
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) {
      return false;
    }
  }
  return true;
}

expected<void> tool_catalog::add(tool_descriptor tool) {
  if (!valid_tool_name(tool.name)) {
    return fail(errc::invalid_argument,
                fmt::format("'{}' is not a valid tool name (1-64 of A-Z a-z 0-9 _ -)", tool.name));
  }
  if (find(tool.name) != nullptr) {
    return fail(errc::conflict, fmt::format("a tool named '{}' exists already", tool.name));
  }
  tools_.push_back(std::move(tool));
  return {};
}

const tool_descriptor* tool_catalog::find(std::string_view name) const noexcept {
  for (const auto& t : tools_) {
    if (t.name == name) {
      return &t;
    }
  }
  return nullptr;
}

} // namespace troupe::tools
