#pragma once

/// \file
/// What a final answer candidate says about the run: that the work is done, blocked,
/// partly done, or merely announced ("I will now …"). Phrase lists in English and
/// Chinese, matched case-insensitively with word boundaries for English.

#include <string_view>

namespace troupe::harness {

/// The outcome a final answer reports.
enum class outcome {
  /// Nothing recognisable: treated as an ordinary answer.
  unknown,
  /// The answer delivers a result.
  success,
  /// The answer explains why the work cannot be done.
  blocked,
  /// The answer delivers some results and explains what failed.
  partial,
  /// The answer only announces work that has not happened ("let me now run …").
  progress_only,
};

std::string_view to_string(outcome o) noexcept;

/// Classifies a final answer candidate. Rules, first match wins: a blocker cue and a
/// result cue (or an explicit "partially") -> partial; a blocker cue -> blocked; a result
/// cue -> success; a progress cue (and the answer is not a JSON value) -> progress_only;
/// otherwise unknown. An empty answer is unknown.
outcome classify_outcome(std::string_view answer);

/// True when the answer announces work instead of delivering it.
inline bool is_progress_only(std::string_view answer) {
  return classify_outcome(answer) == outcome::progress_only;
}

} // namespace troupe::harness
