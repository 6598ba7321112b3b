#pragma once

/// \file
/// What a conversation's next prompt would carry, as a value the HTTP layer reads
/// (`GET /api/v1/conversations/{id}/context`). CAF-free.

#include <cstddef>
#include <string>
#include <vector>

#include "troupe/runtime/chat.hpp"

namespace troupe::actors {

/// What a conversation's next prompt would carry besides the next message (issue 16,
/// `GET /api/v1/conversations/{id}/context`): its history and the token estimate of each
/// fixed part (prompt/token_estimate.hpp).
struct prompt_context_view {
  /// "live": asked of the conversation in memory; "stored": rebuilt from the database as
  /// the conversation would load.
  std::string source;
  /// A run of the conversation is under way: its turn joins the history when it ends.
  bool run_active = false;
  /// The history, oldest first (a compression summary as its marked message).
  std::vector<chat_message> messages;
  /// The estimate of `messages`.
  std::size_t history_tokens = 0;
  /// The system message without the memory block and the run's plan: the agent's system
  /// prompt and, when the history holds a summary, the compression note.
  std::size_t system_tokens = 0;
  /// The tool definitions offered to the model.
  std::size_t tool_tokens = 0;
  /// history + system + tools.
  std::size_t estimated_tokens = 0;
  /// The memory block is left out of the estimate: it is recalled for the next message.
  /// Its items' characters at most (`memory_max_chars`); 0 when the agent has no memory.
  std::size_t memory_max_chars = 0;
  /// The agent's context window, and the estimate at which a round compresses.
  std::size_t context_window = 0;
  std::size_t compression_trigger_tokens = 0;
};

} // namespace troupe::actors
