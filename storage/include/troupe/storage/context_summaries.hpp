#pragma once

/// \file
/// Context compression's durable side (issue 16): the summaries that stand for a
/// conversation's earlier turns in its prompts, and the history a prompt carries when a
/// conversation is loaded back. Only prompts are compressed: the messages a summary
/// covers stay in `messages`, and the API lists them all.
///
/// A summary is written by a run (`run_id`) before that run's prompt drops what it
/// covers: the stored messages from `first_message_id` to `last_message_id` (the
/// conversation's earlier turns, and the run's own earlier tool rounds when a long run
/// compressed them), but for `kept_message_ids` (the run's objective, which stays in the
/// prompt after the summary). A later summary updates the earlier one, so the newest
/// alone is read back. Summaries written before the range was stored (both ids 0) are
/// read with their `head_messages` and `tail_messages` counts instead.
///
/// Which rows a prompt message stands for is known to the writes that stored them: each
/// prompt message may carry a `message_span`, filled on the store writer's thread by the
/// write that stores the message, and read there by the summary's write, which the
/// writer applies after it (writes of one sender apply in order; a run's own writes wait
/// for its user message's).

#include <cstddef>
#include <cstdint>
#include <memory>
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
  /// The run that wrote it.
  row_id run_id = 0;
  /// The summary's text (without the marker line).
  std::string summary;
  /// The stored messages it covers, first and last (0: written before this was kept).
  row_id first_message_id = 0;
  row_id last_message_id = 0;
  /// Messages in that range that are not covered: they follow the summary in the prompt
  /// (the objective of a run that compressed its own tool rounds).
  std::vector<row_id> kept_message_ids;
  /// Of the history before that run: the messages kept before the summary and after it
  /// (how summaries without a range are read back; the head count also bounds the
  /// messages loaded before the range).
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
/// Inserts `r` with the range its prompt messages stand for, read when the write runs:
/// the lowest and highest rows of `covered` (the spans of the messages summarised), and
/// the rows of `uncovered` (the prompt messages left) that fall inside that range as its
/// kept messages. `summary_span` (when set) receives the range, so a later summary that
/// covers this one covers what it did.
write_op insert_context_summary_op(context_summary_record r, std::vector<message_span> covered,
                                   std::vector<message_span> uncovered, message_span summary_span);
/// The conversation's newest summary, if it has one.
expected<std::optional<context_summary_record>> latest_context_summary(connection& c,
                                                                       row_id conversation_id);

/// The user messages and final answers of stored messages, in order (tool rounds stay
/// with their run, empty texts are left out); `ids` (when given) receives the row of
/// each.
std::vector<chat_message> user_and_answers(std::span<const message_record> rows,
                                           std::vector<row_id>* ids = nullptr);

/// What a prompt carries of a conversation's earlier turns when it is loaded.
struct prompt_history {
  /// The history, oldest first: with a summary, its kept head, the summary message
  /// (prompt/compression.hpp) and the turns after it.
  std::vector<chat_message> messages;
  /// Parallel to `messages`: the rows each stands for (the summary message: its range).
  std::vector<stored_span> spans;
  /// The summary the history starts from.
  std::optional<context_summary_record> summary;
  /// The estimate of `messages` (prompt/token_estimate.hpp).
  std::size_t estimated_tokens = 0;
};

/// Loads a conversation's history for its next prompt: from its newest summary when it
/// has one (the messages before its range, at most its head count; the summary; its kept
/// messages and the messages after its range), the turns after it shaped by
/// `prompt::shape_loaded_history` (the newest 3 in full, the 5 before them cut, older ones
/// as question and answer) within `budget_tokens` (0: no budget; the oldest turns go
/// first), at most `max_messages` messages. Messages of `excluded_runs` (queued runs,
/// whose message is their objective) are left out.
expected<prompt_history> load_prompt_history(connection& c, row_id conversation_id,
                                             std::size_t max_messages, std::size_t budget_tokens,
                                             std::span<const row_id> excluded_runs = {});

} // namespace troupe::storage
