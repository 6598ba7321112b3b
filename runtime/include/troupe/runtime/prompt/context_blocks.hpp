#pragma once

/// \file
/// Named context blocks: text the run adds to the agent's system prompt, each in a slot
/// of its own, in a fixed order. The standard slots are the memory block
/// (`<memory_context>…</memory_context>`, retained facts about the user) and the plan
/// state (`<plan_state>…</plan_state>`); a feature that needs another block declares a
/// slot of its own instead of concatenating strings. Each block's text is complete as
/// it is given (it carries its own tags); an empty block is absent from the prompt.

#include <string>
#include <string_view>
#include <vector>

#include "troupe/runtime/error.hpp"

namespace troupe::prompt {

/// The slot of the memory block (issue 15 fills it).
inline constexpr std::string_view memory_block = "memory_context";
/// The slot of the plan state (`harness::plan_state::render()`).
inline constexpr std::string_view plan_block = "plan_state";

/// One block: its slot's name and its text (empty: absent).
struct context_block {
  std::string name;
  std::string text;
};

/// Ordered, named slots for context blocks.
class context_blocks {
public:
  /// The standard slots, in prompt order: memory_context, then plan_state.
  context_blocks();

  /// Adds an empty slot called `name` after the existing ones; fails when a slot of that
  /// name exists or the name is empty.
  expected<void> declare(std::string_view name);
  /// Sets the text of slot `name`; fails (naming the slot) when no such slot exists.
  expected<void> set(std::string_view name, std::string text);
  /// Empties slot `name` (a no-op for an unknown name).
  void clear(std::string_view name) noexcept;
  /// The text of slot `name`, empty when absent or unknown.
  std::string_view text(std::string_view name) const noexcept;
  /// Every slot in order, empty ones included.
  const std::vector<context_block>& slots() const noexcept {
    return slots_;
  }

private:
  std::vector<context_block> slots_;
};

/// The system message's text: `system_prompt` and every non-empty block, in slot order,
/// separated by a blank line. Empty when all of them are empty.
std::string render_system_text(std::string_view system_prompt, const context_blocks& blocks);

} // namespace troupe::prompt
