#pragma once

/// \file
/// The correction policy: one budget shared by final-gate corrections, progress-only
/// continuation and LLM-round recovery; the prompts the run sends the model when it
/// corrects; the failure message when the budget is spent; and the classification of an
/// LLM round (complete, truncated, filtered, empty, interrupted).

#include <span>
#include <string>
#include <string_view>

#include "troupe/runtime/harness/evidence_ledger.hpp"
#include "troupe/runtime/harness/validators.hpp"

namespace troupe::harness {

/// Why a correction is spent.
enum class correction_reason {
  /// The final gate (pre_final or pre_save) rejected the answer.
  final_gate,
  /// The answer only announced work; the run asks the model to continue.
  progress_only,
  /// The LLM round itself was unusable (truncated, empty, interrupted).
  llm_recovery,
};

std::string_view to_string(correction_reason r) noexcept;

/// The budget of corrections for one run. `max_attempts` corrections are allowed; the
/// next one fails the run. A successful tool round means the model is making progress
/// again and refills the budget.
class correction_budget {
public:
  explicit correction_budget(int max_attempts = default_correction_attempts) noexcept
      : max_(max_attempts < 0 ? 0 : max_attempts) {}

  /// Takes one attempt; false (and nothing taken) when the budget is spent.
  bool try_consume() noexcept {
    if (used_ >= max_) {
      return false;
    }
    ++used_;
    return true;
  }
  /// Refills the budget (call after a successful tool round).
  void reset() noexcept {
    used_ = 0;
  }
  int used() const noexcept {
    return used_;
  }
  int max() const noexcept {
    return max_;
  }
  int remaining() const noexcept {
    return max_ - used_;
  }
  bool exhausted() const noexcept {
    return used_ >= max_;
  }

private:
  int max_;
  int used_ = 0;
};

/// True when a tool round counts as progress: at least one execution tool (not plan,
/// tool_search or finish) succeeded. The run then calls `budget.reset()`.
bool is_successful_tool_round(std::span<const tool_event> round) noexcept;

/// What the run does next after a rejected answer or an unusable LLM round.
struct correction_directive {
  enum class action {
    /// Send `prompt` to the model as a new user-role message and run another LLM round.
    retry,
    /// End the run as failed with `failure_message` shown to the user.
    fail,
  };
  action what = action::retry;
  correction_reason reason = correction_reason::final_gate;
  /// 1-based attempt within the budget (for retry), or the attempts used (for fail).
  int attempt = 0;
  int max_attempts = 0;
  std::string prompt;
  std::string failure_message;

  bool retry() const noexcept {
    return what == action::retry;
  }
  /// The correction_event to record in the ledger.
  correction_event to_event(const decision* cause, int round) const;
};

/// Decides what to do about a rejected final answer: a correction prompt listing the
/// violations and required actions (final_gate, or progress_only when the only critical
/// problem is a progress-only answer) while the budget lasts, then an explicit failure.
correction_directive correct_final(correction_budget& budget, const decision& rejected,
                                   const evidence_ledger& ledger);

/// How an LLM round ended, from the run's point of view.
enum class llm_round_kind {
  /// Text and no tool calls: a final answer candidate for the gate.
  final_candidate,
  /// Tool calls with complete JSON arguments: execute them.
  complete_tool_calls,
  /// The output limit cut a tool call short (or its arguments are not a JSON object):
  /// never executed; recover.
  truncated_tool_call,
  /// The output limit cut the text short; recover.
  truncated_content,
  /// The provider's safety filter stopped the round; fail closed, never retried.
  content_filtered,
  /// Neither text nor tool calls; recover.
  empty_response,
  /// The stream broke off mid-round (connection reset, provider resource exhausted);
  /// recover.
  provider_interrupted,
};

std::string_view to_string(llm_round_kind k) noexcept;

/// The facts of one finished LLM round.
struct llm_round_facts {
  /// The provider's finish reason as sent ("stop", "length", "tool_calls",
  /// "content_filter", "end_turn", "max_tokens", "safety", …); empty if none arrived.
  std::string_view finish_reason;
  std::string_view content;
  /// The raw argument strings of the round's tool calls, in order.
  std::span<const std::string> tool_arguments = {};
  /// The stream ended with a transport or provider error after it started.
  bool interrupted = false;
};

/// Classifies a round. Only complete_tool_calls may execute tools.
llm_round_kind classify_llm_round(const llm_round_facts& facts);

/// Decides what to do about an unusable round: content_filtered fails at once without
/// spending budget; the others retry with a recovery prompt while the budget lasts.
/// Must not be called with final_candidate or complete_tool_calls.
correction_directive recover_llm_round(correction_budget& budget, llm_round_kind kind);

} // namespace troupe::harness
