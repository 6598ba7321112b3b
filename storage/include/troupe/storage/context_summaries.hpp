#pragma once

/// \file
/// Context compression's durable side (issue 16): the summaries that stand for a
/// conversation's earlier turns in its prompts, and the history a prompt carries when a
/// conversation is loaded back. Only prompts are compressed: the messages a summary
/// covers stay in `messages`, and the API lists them all.
///
/// A summary is written by a run (`run_id`) before that run's prompt drops what it
/// covers. It covers the conversation's history as that run saw it (its user messages
/// and final answers before the run's own message) but for the first `head_messages`
/// and the last `tail_messages` of it. A later summary updates the earlier one, so the
/// newest alone is read back.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "troupe/runtime/chat.hpp"
#include "troupe/storage/connection.hpp"
#include "troupe/storage/records.hpp"
#include "troupe/storage/write_op.hpp"

namespace troupe::storage {

struct context_summary_record {
  row_id id = 0;
  row_id conversation_id = 0;
  /// The run that wrote it: its messages and every later one follow the summary.
  row_id run_id = 0;
  /// The summary's text (without the marker line).
  std::string summary;
  /// Of the history before that run: the messages kept before the summary and after it.
  std::int64_t head_messages = 0;
  std::int64_t tail_messages = 0;
  /// The messages the summary stands for, and the prompt's estimate before and after.
  std::int64_t covered_messages = 0;
  std::int64_t tokens_before = 0;
  std::int64_t tokens_after = 0;
  /// The model that wrote it.
  std::string model;
  std::int64_t created_at = 0;
};

expected<row_id> insert_context_summary(connection& c, const context_summary_record& r);
/// Inserts `r`; its `run_id` and `conversation_id` are given by the caller.
write_op insert_context_summary_op(context_summary_record r);
/// The conversation's newest summary, if it has one.
expected<std::optional<context_summary_record>> latest_context_summary(connection& c,
                                                                       row_id conversation_id);

/// The user messages and final answers of stored messages, in order (tool rounds stay
/// with their run, empty texts are left out).
std::vector<chat_message> user_and_answers(std::span<const message_record> rows);

/// What a prompt carries of a conversation's earlier turns when it is loaded.
struct prompt_history {
  /// The history, oldest first: with a summary, its kept head, the summary message
  /// (prompt/compression.hpp) and the turns after it.
  std::vector<chat_message> messages;
  /// The summary the history starts from.
  std::optional<context_summary_record> summary;
  /// The estimate of `messages` (prompt/token_estimate.hpp).
  std::size_t estimated_tokens = 0;
};

/// Loads a conversation's history for its next prompt: from its newest summary when it
/// has one, the turns after it shaped by `prompt::shape_loaded_history` (newest in full,
/// older ones cut) within `budget_tokens` (0: no budget), at most `max_messages`
/// messages. Messages of `excluded_runs` (queued runs, whose message is their objective)
/// are left out.
expected<prompt_history> load_prompt_history(connection& c, row_id conversation_id,
                                             std::size_t max_messages, std::size_t budget_tokens,
                                             std::span<const row_id> excluded_runs = {});

} // namespace troupe::storage
