#include "troupe/runtime/harness/correction_policy.hpp"

#include <algorithm>

#include <simdjson.h>

#include "harness/text.hpp"

namespace troupe::harness {

namespace {

std::string bullet_list(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) {
    out += "- " + line + "\n";
  }
  return out;
}

std::string joined_codes(const decision& d) {
  std::string out;
  for (const auto& code : d.codes()) {
    out += (out.empty() ? "" : ", ") + code;
  }
  return out;
}

bool only_progress_problem(const decision& d) {
  bool progress = false;
  for (const auto& v : d.violations) {
    if (v.level != severity::critical) {
      continue;
    }
    if (v.code != violation_code::final_answer_incomplete_progress) {
      return false;
    }
    progress = true;
  }
  return progress;
}

// Complete tool-call arguments: one JSON object, or nothing (a call without arguments).
bool complete_arguments(std::string_view arguments) {
  const auto trimmed = detail::trim(arguments);
  if (trimmed.empty()) {
    return true;
  }
  simdjson::dom::parser parser;
  const simdjson::padded_string buffer(trimmed);
  simdjson::dom::element root;
  return parser.parse(buffer).get(root) == simdjson::SUCCESS && root.is_object();
}

} // namespace

std::string_view to_string(correction_reason r) noexcept {
  switch (r) {
    case correction_reason::final_gate:
      return "final_gate";
    case correction_reason::progress_only:
      return "progress_only";
    case correction_reason::llm_recovery:
      return "llm_recovery";
  }
  return "final_gate";
}

std::string_view to_string(llm_round_kind k) noexcept {
  switch (k) {
    case llm_round_kind::final_candidate:
      return "final_candidate";
    case llm_round_kind::complete_tool_calls:
      return "complete_tool_calls";
    case llm_round_kind::truncated_tool_call:
      return "truncated_tool_call";
    case llm_round_kind::truncated_content:
      return "truncated_content";
    case llm_round_kind::content_filtered:
      return "content_filtered";
    case llm_round_kind::empty_response:
      return "empty_response";
    case llm_round_kind::provider_interrupted:
      return "provider_interrupted";
  }
  return "empty_response";
}

bool is_successful_tool_round(std::span<const tool_event> round) noexcept {
  return std::any_of(round.begin(), round.end(), [](const tool_event& e) {
    return e.status == tool_status::success && !is_bookkeeping_tool(e.tool);
  });
}

correction_event correction_directive::to_event(const decision* cause, int round) const {
  correction_event event;
  event.reason = std::string(to_string(reason));
  event.attempt = attempt;
  if (cause != nullptr) {
    event.violation_codes = cause->codes();
  }
  event.sent = retry();
  event.round = round;
  return event;
}

correction_directive correct_final(correction_budget& budget, const decision& rejected,
                                   const evidence_ledger& ledger) {
  correction_directive d;
  d.reason = only_progress_problem(rejected) ? correction_reason::progress_only
                                             : correction_reason::final_gate;
  d.max_attempts = budget.max();
  std::vector<std::string> problems;
  for (const auto& v : rejected.violations) {
    problems.push_back(v.message);
  }
  if (!budget.try_consume()) {
    d.what = correction_directive::action::fail;
    d.attempt = budget.used();
    d.failure_message = "The run stopped: the final answer still failed its checks after " +
                        std::to_string(budget.used()) + " correction attempt(s) (" +
                        joined_codes(rejected) + ").\nUnresolved:\n" + bullet_list(problems);
    return d;
  }
  d.attempt = budget.used();
  std::string prompt;
  if (d.reason == correction_reason::progress_only) {
    prompt = "You described what you are going to do, but the work has not been done. Do it "
             "now: call the tools the task needs, then answer with the actual result (or the "
             "concrete reason it cannot be done).";
  } else {
    prompt = "Your answer cannot be accepted yet.";
  }
  prompt += " (Correction " + std::to_string(d.attempt) + " of " + std::to_string(d.max_attempts) +
            ".)\n\nProblems:\n" + bullet_list(problems) + "\nRequired:\n" +
            bullet_list(rejected.required_actions()) +
            "\nSo far: " + std::to_string(ledger.successful_execution_count()) +
            " tool call(s) succeeded, " + std::to_string(ledger.failed_execution_count()) +
            " failed, " + std::to_string(ledger.artifacts().size()) +
            " file(s) produced.\n\nContinue the task: call tools if you need them, keep the "
            "plan up to date with the plan tool if you have one, and give the final answer "
            "only when the task is actually done.";
  d.prompt = std::move(prompt);
  return d;
}

llm_round_kind classify_llm_round(const llm_round_facts& facts) {
  const auto reason = detail::fold(detail::trim(facts.finish_reason));
  if (reason == "content_filter" || reason == "safety" || reason == "refusal" ||
      reason == "recitation" || reason == "prohibited_content" || reason == "blocklist" ||
      reason == "spii") {
    return llm_round_kind::content_filtered;
  }
  const bool has_calls = !facts.tool_arguments.empty();
  if (facts.interrupted) {
    // A tool call from a broken stream is incomplete by definition: never executed.
    return has_calls ? llm_round_kind::truncated_tool_call : llm_round_kind::provider_interrupted;
  }
  if (reason == "length" || reason == "max_tokens" || reason == "max_output_tokens" ||
      reason == "model_length") {
    return has_calls ? llm_round_kind::truncated_tool_call : llm_round_kind::truncated_content;
  }
  if (has_calls) {
    const bool complete = std::all_of(facts.tool_arguments.begin(), facts.tool_arguments.end(),
                                      [](const std::string& a) { return complete_arguments(a); });
    return complete ? llm_round_kind::complete_tool_calls : llm_round_kind::truncated_tool_call;
  }
  if (detail::trim(facts.content).empty()) {
    return llm_round_kind::empty_response;
  }
  return llm_round_kind::final_candidate;
}

correction_directive recover_llm_round(correction_budget& budget, llm_round_kind kind) {
  correction_directive d;
  d.reason = correction_reason::llm_recovery;
  d.max_attempts = budget.max();
  if (kind == llm_round_kind::content_filtered) {
    d.what = correction_directive::action::fail;
    d.attempt = budget.used();
    d.failure_message = "The run stopped: the model provider's content filter blocked the "
                        "reply. The run fails closed and does not retry.";
    return d;
  }
  if (!budget.try_consume()) {
    d.what = correction_directive::action::fail;
    d.attempt = budget.used();
    d.failure_message = "The run stopped: the model's reply was unusable (" +
                        std::string(to_string(kind)) + ") and the correction budget of " +
                        std::to_string(budget.max()) + " attempt(s) is spent.";
    return d;
  }
  d.attempt = budget.used();
  switch (kind) {
    case llm_round_kind::truncated_tool_call:
      d.prompt = "Your last tool call was cut off before its arguments were complete, so it "
                 "was not executed. Call the tool again with shorter arguments (split large "
                 "content over several calls), or answer directly.";
      break;
    case llm_round_kind::truncated_content:
      d.prompt = "Your last reply was cut off by the output limit. Give a complete, shorter "
                 "answer; put long content into a file with a tool if you need to.";
      break;
    case llm_round_kind::provider_interrupted:
      d.prompt = "The connection to the model broke off during your last reply and the reply "
                 "was discarded. Continue the task from where it stood.";
      break;
    case llm_round_kind::empty_response:
    default:
      d.prompt = "Your last reply was empty. Continue the task: call a tool, or give the "
                 "final answer.";
      break;
  }
  return d;
}

} // namespace troupe::harness
