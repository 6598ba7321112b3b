#pragma once

/// \file
/// How a run ended, as a value: what the run actor answers, what a journal keeps for
/// replay, and what the HTTP layer serializes. CAF-free, so `api/` can read it.

#include <optional>
#include <string>
#include <vector>

#include "troupe/runtime/chat.hpp"
#include "troupe/runtime/harness/evidence_ledger.hpp"
#include "troupe/storage/records.hpp"

namespace troupe::actors {

/// One entry of a run's step summary (the steps also go to the database).
struct run_step {
  /// llm, tool, harness or model.
  std::string kind;
  std::string name;
  std::string status;
  /// A short JSON or text detail.
  std::string detail;
};

/// How a run ended.
struct run_result {
  /// The run's public id (its row's uuid).
  std::string run_id;
  /// succeeded, failed or cancelled.
  storage::run_status status = storage::run_status::failed;
  /// The accepted final answer (with links to its files).
  std::string text;
  /// Why the run failed or was cancelled.
  std::string error;
  token_usage usage;
  /// LLM rounds started and provider calls made.
  int rounds = 0;
  int llm_calls = 0;
  /// The model of the last LLM round (the fallback model once it was switched to).
  std::string model;
  std::vector<run_step> steps;
  /// Files the run (and its sub-agents) produced.
  std::vector<harness::artifact> artifacts;
  /// Set when the run compressed its prompt (issue 16): the conversation's history as
  /// the run left it (the kept head, the summary message, the kept tail), which the
  /// conversation's next turns start from. The summary was stored before.
  std::optional<std::vector<chat_message>> compressed_history;
  /// With `compressed_history`: the stored rows each of its messages stands for.
  std::vector<storage::message_span> compressed_spans;
  /// The stored row of the final answer, filled by the write that stores it (null: not
  /// stored).
  storage::message_span answer_span;
};

} // namespace troupe::actors
