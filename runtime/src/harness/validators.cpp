#include "troupe/runtime/harness/validators.hpp"

#include <algorithm>

#include "harness/json_shape.hpp"
#include "harness/text.hpp"
#include "troupe/runtime/harness/outcome.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::harness {

namespace {

void add(decision& d, violation_code code, std::string message, std::string action,
         severity level = severity::critical) {
  d.violations.push_back({code, level, std::move(message), std::move(action)});
  if (level == severity::critical) {
    d.allowed = false;
  }
}

std::string basename_of(std::string_view path) {
  const auto slash = path.find_last_of("/\\");
  return detail::fold(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

bool is_attachment(std::span<const std::string> attachments, std::string_view name) {
  return std::any_of(attachments.begin(), attachments.end(),
                     [&](const std::string& a) { return basename_of(a) == name; });
}

bool matches_artifact(const evidence_ledger& ledger, std::string_view name) {
  return std::any_of(ledger.artifacts().begin(), ledger.artifacts().end(), [&](const artifact& a) {
    return basename_of(a.name) == name || basename_of(a.path) == name;
  });
}

// The answer says a file was delivered ("saved to report.md", "已生成文件").
bool claims_file(std::string_view folded, bool mentions_file) {
  const bool claim = detail::contains_any(
      folded, {"saved", "created", "generated", "wrote", "written", "exported", "attached",
               "download", "已保存", "已生成", "已创建", "已导出", "生成了", "保存了", "写入了"});
  return claim && (mentions_file || detail::contains_any(folded, {"file", "文件"}));
}

bool references(std::string_view answer, std::string_view ref) {
  if (ref.empty()) {
    return false;
  }
  if (answer.find(ref) != std::string_view::npos) {
    return true;
  }
  std::string escaped;
  for (const char c : ref) {
    if (c == ' ') {
      escaped += "%20";
    } else if (c == '(') {
      escaped += "%28";
    } else if (c == ')') {
      escaped += "%29";
    } else {
      escaped += c;
    }
  }
  return answer.find(escaped) != std::string_view::npos;
}

void check_final(decision& d, const task_contract& contract, const evidence_ledger& ledger,
                 const plan_state& plan, const final_candidate& candidate) {
  const auto answer = detail::trim(candidate.answer);
  if (answer.empty()) {
    if (contract.require_final_answer) {
      add(d, violation_code::final_answer_empty, "The final answer is empty.",
          "Write the final answer for the user from the tool results you already have.");
    }
    return;
  }
  const auto kind = classify_outcome(answer);
  const bool explains_failure = kind == outcome::blocked || kind == outcome::partial;
  if (kind == outcome::progress_only) {
    add(d, violation_code::final_answer_incomplete_progress,
        "The final answer only announces work that has not been done yet.",
        "Do the promised work now (call the tools), then answer with the actual result, the "
        "file links, or the concrete reason it cannot be done.");
  }

  if (contract.require_plan && !plan.ready_for_final_answer()) {
    std::string open;
    for (const auto& item : plan.items()) {
      if (!is_terminal(item.status)) {
        open += (open.empty() ? "" : ", ") + item.id;
      }
    }
    add(d, violation_code::plan_not_terminal,
        open.empty() ? "The task requires a plan and there is none."
                     : "The plan still has open items: " + open + ".",
        "Finish the open plan items, or mark them completed, skipped, blocked or failed with "
        "the plan tool, before answering.");
  }
  if (contract.require_plan && plan.source() == plan_source::harness && !plan.all_terminal() &&
      !ledger.has_successful_evidence()) {
    add(d, violation_code::harness_plan_unproven,
        "The plan is still the initial template and no tool has produced evidence.",
        "Call the tools the task needs and advance the plan with the plan tool.");
  }

  if (ledger.failure_without_later_success() && !explains_failure) {
    add(d, violation_code::no_successful_evidence_after_tool_failure,
        "A tool call failed, nothing succeeded after it, and the answer does not say so.",
        "Retry with a working tool or corrected arguments; if the task cannot be finished, say "
        "what failed instead of claiming success.");
  } else if (contract.require_tool_evidence && !ledger.has_successful_evidence() &&
             !(explains_failure && !ledger.blockers().empty())) {
    // An answer that reports a failure is excused only when a tool actually failed: "I
    // can't look that up" without trying is not evidence of a blocker.
    add(d, violation_code::tool_evidence_missing,
        "The task needs tool results and no tool has been called successfully.",
        "Call the tools that produce the needed information or files before answering.");
  }

  const auto folded = detail::fold(answer);
  std::vector<std::string> claimed_names;
  bool mentions_file = false;
  for (const auto& mention : detail::find_file_mentions(folded)) {
    mentions_file = true;
    if (!mention.name.empty() && !is_attachment(candidate.attachments, mention.name) &&
        !detail::mention_is_input(folded, mention)) {
      claimed_names.push_back(mention.name);
    }
  }
  const bool claims = claims_file(folded, mentions_file);
  auto required = static_cast<std::size_t>(std::max(0, contract.required_artifact_count));
  if (required == 0 && claims) {
    required = 1;
  }
  const bool honest_blocker = kind == outcome::blocked && ledger.has_terminal_blocker();
  if (required > 0 && ledger.artifacts().size() < required && !honest_blocker) {
    add(d, violation_code::required_artifact_missing,
        contract.required_artifact_count > 0
            ? "The task asks for " + std::to_string(required) + " file(s) and " +
                  std::to_string(ledger.artifacts().size()) + " were produced."
            : std::string("The answer says a file was delivered, but no tool produced one."),
        "Create the file with a tool (for example write), or stop claiming that it exists.");
  }
  if (ledger.referenceable_artifact_count() < ledger.artifacts().size()) {
    add(d, violation_code::artifact_reference_missing,
        "A produced file has no file id, path or URL to reference it by.",
        "Save the file into the workspace or file store so that it has a path or id.");
  } else if (claims && !ledger.artifacts().empty()) {
    for (const auto& name : claimed_names) {
      if (!matches_artifact(ledger, name)) {
        add(d, violation_code::artifact_reference_missing,
            "The answer names " + name + " as delivered, but no tool produced " + name + ".",
            "Refer only to files that were actually produced, or create the missing file.");
        break;
      }
    }
  }

  if (contract.mode == output_mode::json) {
    const auto unfenced = detail::strip_code_fence(answer);
    std::string reason;
    switch (detail::json_shape_of(answer, &reason)) {
      case detail::json_shape::single:
        break;
      case detail::json_shape::multiple:
        add(d, violation_code::json_output_multiple_values,
            "The answer holds more than one JSON value.",
            "Answer with exactly one JSON value (wrap several items in one array or object).");
        break;
      case detail::json_shape::invalid:
        if (unfenced.size() != answer.size() &&
            detail::json_shape_of(unfenced) != detail::json_shape::invalid) {
          add(d, violation_code::json_output_invalid,
              "The answer wraps the JSON in a Markdown code fence.",
              "Answer with the bare JSON value only: no code fence, no text around it.");
        } else {
          add(d, violation_code::json_output_invalid,
              "The answer is not valid JSON (" + reason + ").",
              "Answer with one valid JSON value only, and no text around it.");
        }
        break;
    }
  }
}

} // namespace

std::string_view to_string(stage s) noexcept {
  switch (s) {
    case stage::pre_tool:
      return "pre_tool";
    case stage::post_tool:
      return "post_tool";
    case stage::pre_final:
      return "pre_final";
    case stage::pre_save:
      return "pre_save";
  }
  return "pre_tool";
}

std::string_view to_string(severity s) noexcept {
  return s == severity::critical ? "critical" : "warning";
}

std::string_view to_string(violation_code c) noexcept {
  switch (c) {
    case violation_code::tool_blocked_by_contract:
      return "tool_blocked_by_contract";
    case violation_code::tool_not_allowed_by_contract:
      return "tool_not_allowed_by_contract";
    case violation_code::tool_loop_detected:
      return "tool_loop_detected";
    case violation_code::tool_failed:
      return "tool_failed";
    case violation_code::final_answer_empty:
      return "final_answer_empty";
    case violation_code::final_answer_incomplete_progress:
      return "final_answer_incomplete_progress";
    case violation_code::plan_not_terminal:
      return "plan_not_terminal";
    case violation_code::harness_plan_unproven:
      return "harness_plan_unproven";
    case violation_code::no_successful_evidence_after_tool_failure:
      return "no_successful_evidence_after_tool_failure";
    case violation_code::tool_evidence_missing:
      return "tool_evidence_missing";
    case violation_code::required_artifact_missing:
      return "required_artifact_missing";
    case violation_code::artifact_reference_missing:
      return "artifact_reference_missing";
    case violation_code::file_output_ref_missing:
      return "file_output_ref_missing";
    case violation_code::json_output_invalid:
      return "json_output_invalid";
    case violation_code::json_output_multiple_values:
      return "json_output_multiple_values";
  }
  return "unknown";
}

bool decision::has(violation_code code) const noexcept {
  return std::any_of(violations.begin(), violations.end(),
                     [&](const violation& v) { return v.code == code; });
}

std::vector<std::string> decision::codes() const {
  std::vector<std::string> out;
  out.reserve(violations.size());
  for (const auto& v : violations) {
    out.emplace_back(to_string(v.code));
  }
  return out;
}

std::vector<std::string> decision::required_actions() const {
  std::vector<std::string> out;
  for (const auto& v : violations) {
    if (!v.required_action.empty() &&
        std::find(out.begin(), out.end(), v.required_action) == out.end()) {
      out.push_back(v.required_action);
    }
  }
  return out;
}

std::string decision::to_json() const {
  json_writer w;
  w.begin_object();
  w.key("stage").value(to_string(at));
  w.key("allowed").value(allowed);
  w.key("violation_codes").begin_array();
  for (const auto& v : violations) {
    w.value(to_string(v.code));
  }
  w.end_array();
  w.key("required_actions").begin_array();
  for (const auto& action : required_actions()) {
    w.value(action);
  }
  w.end_array();
  w.key("violations").begin_array();
  for (const auto& v : violations) {
    w.begin_object()
        .key("code")
        .value(to_string(v.code))
        .key("severity")
        .value(to_string(v.level))
        .key("message")
        .value(v.message)
        .end_object();
  }
  w.end_array();
  w.end_object();
  return std::move(w).str();
}

validation_event decision::to_event(int round) const {
  return {std::string(to_string(at)), allowed, codes(), round};
}

decision validate_pre_tool(const task_contract& contract, std::string_view tool,
                           const loop_verdict& loop) {
  decision d;
  d.at = stage::pre_tool;
  const std::string name(tool);
  if (contract.tools.is_blocked(tool)) {
    add(d, violation_code::tool_blocked_by_contract,
        "The tool " + name + " is blocked for this task.",
        "Choose a tool the task allows, or stop and explain the restriction.");
  } else if (!contract.tools.is_allowed(tool)) {
    add(d, violation_code::tool_not_allowed_by_contract,
        "The tool " + name + " is not among the tools this task may use.",
        "Choose one of the allowed tools, or stop and explain the restriction.");
  }
  if (!loop.ok()) {
    add(d, violation_code::tool_loop_detected, loop.message,
        "Change the arguments or the approach instead of repeating the same calls.",
        loop.blocked ? severity::critical : severity::warning);
  }
  return d;
}

decision validate_post_tool(std::span<const tool_event> round) {
  decision d;
  d.at = stage::post_tool;
  for (const auto& event : round) {
    if (!event.failed()) {
      continue;
    }
    const auto kind = event.failure_kind.value_or(blocker_kind::tool_error);
    add(d, violation_code::tool_failed,
        "The tool " + event.tool + " failed (" + std::string(to_string(kind)) +
            (event.error.empty() ? std::string(")") : "): " + summarize(event.error, 240)),
        std::string(required_action(kind)), severity::warning);
  }
  return d;
}

decision validate_pre_final(const task_contract& contract, const evidence_ledger& ledger,
                            const plan_state& plan, const final_candidate& candidate) {
  decision d;
  d.at = stage::pre_final;
  check_final(d, contract, ledger, plan, candidate);
  return d;
}

decision validate_pre_save(const task_contract& contract, const evidence_ledger& ledger,
                           const plan_state& plan, const final_candidate& candidate) {
  decision d;
  d.at = stage::pre_save;
  check_final(d, contract, ledger, plan, candidate);
  if (contract.expects_files() && !ledger.artifacts().empty()) {
    std::vector<std::string> missing;
    for (const auto& a : ledger.artifacts()) {
      if (!(references(candidate.answer, a.url) || references(candidate.answer, a.file_id) ||
            references(candidate.answer, a.path) || references(candidate.answer, a.name))) {
        missing.push_back(a.name.empty() ? a.path : a.name);
      }
    }
    if (!missing.empty()) {
      std::string names;
      for (const auto& m : missing) {
        names += (names.empty() ? "" : ", ") + m;
      }
      add(d, violation_code::file_output_ref_missing,
          "The answer does not reference the produced file(s): " + names + ".",
          "Include a link or the path of every produced file in the final answer.");
    }
  }
  return d;
}

} // namespace troupe::harness
