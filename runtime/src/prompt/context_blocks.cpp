#include "troupe/runtime/prompt/context_blocks.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace troupe::prompt {

context_blocks::context_blocks() {
  slots_.push_back({std::string(memory_block), {}});
  slots_.push_back({std::string(plan_block), {}});
}

expected<void> context_blocks::declare(std::string_view name) {
  if (name.empty()) {
    return fail(errc::invalid_argument, "a context block needs a name");
  }
  if (std::any_of(slots_.begin(), slots_.end(), [&](const auto& s) { return s.name == name; })) {
    return fail(errc::conflict, fmt::format("the context block '{}' exists already", name));
  }
  slots_.push_back({std::string(name), {}});
  return {};
}

expected<void> context_blocks::set(std::string_view name, std::string text) {
  for (auto& slot : slots_) {
    if (slot.name == name) {
      slot.text = std::move(text);
      return {};
    }
  }
  return fail(errc::not_found, fmt::format("no context block is called '{}'", name));
}

void context_blocks::clear(std::string_view name) noexcept {
  for (auto& slot : slots_) {
    if (slot.name == name) {
      slot.text.clear();
    }
  }
}

std::string_view context_blocks::text(std::string_view name) const noexcept {
  for (const auto& slot : slots_) {
    if (slot.name == name) {
      return slot.text;
    }
  }
  return {};
}

std::string render_system_text(std::string_view system_prompt, const context_blocks& blocks) {
  std::string out(system_prompt);
  for (const auto& slot : blocks.slots()) {
    if (slot.text.empty()) {
      continue;
    }
    if (!out.empty()) {
      out += "\n\n";
    }
    out += slot.text;
  }
  return out;
}

} // namespace troupe::prompt
