#pragma once

/// \file
/// Prompt assembly: the messages a model receives for one LLM round, built from the
/// agent's system prompt, the named context blocks, and the conversation's history
/// window, cut to a token budget taken from the model's context window.
///
/// The system message is the system prompt followed by the non-empty blocks in slot
/// order (see `render_system_text`), then the history follows in order. When the
/// estimate exceeds the budget, history is dropped from the oldest side, a whole group
/// at a time (an assistant message with tool calls and the tool results answering it
/// are one group and are never split), skipping the pinned message (the run's
/// objective; by default the newest user message). The system message, the blocks and
/// the pinned message are always kept, also when they alone exceed the budget: the
/// result then says it does not fit and the provider decides. The earlier history (the
/// groups before the pinned message) is also cut, the same way, to
/// `history_max_tokens` when that is set. Pure: no I/O.

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "troupe/runtime/agent_config.hpp"
#include "troupe/runtime/chat.hpp"
#include "troupe/runtime/prompt/context_blocks.hpp"

namespace troupe::prompt {

/// How many tokens the messages may take.
struct prompt_budget {
  /// The model's context window (`context_window` of the agent or its provider).
  std::size_t context_window = default_context_window;
  /// Tokens kept free for what the request carries besides the messages (the tool
  /// definitions) and for the answer.
  std::size_t reserved_tokens = 0;
  /// The most tokens the earlier history may take (the messages before the pinned one:
  /// the conversation's earlier turns), whatever room the window leaves
  /// (`actors.history_max_tokens`); 0: only the window bounds it.
  std::size_t history_max_tokens = 0;

  /// The tokens left for the messages.
  std::size_t limit() const noexcept {
    return context_window > reserved_tokens ? context_window - reserved_tokens : 0;
  }
};

/// What one round's prompt is made of. Views: the input must outlive the call only.
struct prompt_input {
  std::string_view system_prompt;
  /// Null: no blocks.
  const context_blocks* blocks = nullptr;
  /// The history window, oldest first, without a system message.
  std::span<const chat_message> history;
  /// Index in `history` of the message that is never dropped; unset: the newest user
  /// message (none when there is no user message).
  std::optional<std::size_t> pinned;
  prompt_budget budget;
};

/// Messages `first` .. `first + count - 1` of a history: one message, or an assistant
/// message with tool calls and the tool results after it.
struct history_group {
  std::size_t first = 0;
  std::size_t count = 0;
  std::size_t tokens = 0;
};

/// Splits `history` into groups: every tool message belongs to the group before it (the
/// assistant message whose call it answers); every other message starts a group.
std::vector<history_group> group_history(std::span<const chat_message> history);

/// A round's prompt and what the budget cost.
struct assembled_prompt {
  /// The system message (when there is any system text), then the kept history.
  std::vector<chat_message> messages;
  /// The estimate of `messages` (see token_estimate.hpp).
  std::size_t estimated_tokens = 0;
  /// The budget's limit the messages were cut to.
  std::size_t budget_tokens = 0;
  /// What was dropped from the history: messages, groups and their estimated tokens.
  std::size_t dropped_messages = 0;
  std::size_t dropped_groups = 0;
  std::size_t dropped_tokens = 0;
  /// The estimate of the earlier history that was kept (the groups before the pinned
  /// message), which `history_max_tokens` bounds.
  std::size_t earlier_tokens = 0;

  /// False when even the messages that are always kept exceed the budget.
  bool fits() const noexcept {
    return estimated_tokens <= budget_tokens;
  }
};

/// Builds one round's messages (see the file comment for the rules).
assembled_prompt assemble_prompt(const prompt_input& input);

} // namespace troupe::prompt
