#include "troupe/runtime/harness/evidence_ledger.hpp"

#include <algorithm>

#include "harness/text.hpp"
#include "troupe/runtime/harness/task_contract.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::harness {

std::string summarize(std::string_view text, std::size_t max_runes) {
  // Walks at most max_runes + 1 code points, so a 64 KiB tool output costs no more than
  // a short one.
  std::size_t cut = 0; // byte offset after max_runes - 1 code points
  std::size_t end = 0;
  for (std::size_t runes = 0; runes < max_runes; ++runes) {
    if (end == text.size()) {
      return std::string(text);
    }
    if (runes + 1 == max_runes) {
      cut = end;
    }
    end = detail::next_rune(text, end);
  }
  if (end == text.size()) {
    return std::string(text);
  }
  if (max_runes == 0) {
    return {};
  }
  return std::string(text.substr(0, cut)) + "\xE2\x80\xA6";
}

std::string_view to_string(tool_status s) noexcept {
  switch (s) {
    case tool_status::success:
      return "success";
    case tool_status::error:
      return "error";
    case tool_status::skipped:
      return "skipped";
    case tool_status::blocked:
      return "blocked";
  }
  return "error";
}

tool_status tool_status_from(std::string_view text) noexcept {
  for (auto s :
       {tool_status::success, tool_status::error, tool_status::skipped, tool_status::blocked}) {
    if (to_string(s) == text) {
      return s;
    }
  }
  return tool_status::error;
}

void evidence_ledger::record_tool(tool_event event) {
  event.arguments_summary = summarize(event.arguments_summary, argument_summary_limit);
  event.output_summary = summarize(event.output_summary, output_summary_limit);
  if (event.failed()) {
    if (!event.failure_kind) {
      event.failure_kind =
          classify_failure(event.error.empty() ? event.output_summary : event.error, std::nullopt,
                           event.status == tool_status::blocked);
    }
    blockers_.push_back({*event.failure_kind, event.tool, event.call_id,
                         summarize(event.error.empty() ? event.output_summary : event.error,
                                   output_summary_limit)});
  }
  tool_events_.push_back(std::move(event));
}

void evidence_ledger::add_artifact(artifact file) {
  artifacts_.push_back(std::move(file));
}

void evidence_ledger::snapshot_plan(const plan_state& plan, int round) {
  plan_snapshots_.push_back({round, plan.items()});
}

void evidence_ledger::record_blocker(blocker b) {
  b.message = summarize(b.message, output_summary_limit);
  blockers_.push_back(std::move(b));
}

void evidence_ledger::record_validation(validation_event event) {
  validation_events_.push_back(std::move(event));
}

void evidence_ledger::record_correction(correction_event event) {
  corrections_.push_back(std::move(event));
}

std::size_t evidence_ledger::execution_call_count() const noexcept {
  return static_cast<std::size_t>(
      std::count_if(tool_events_.begin(), tool_events_.end(),
                    [](const tool_event& e) { return !is_bookkeeping_tool(e.tool); }));
}

std::size_t evidence_ledger::successful_execution_count() const noexcept {
  return static_cast<std::size_t>(
      std::count_if(tool_events_.begin(), tool_events_.end(), [](const tool_event& e) {
        return !is_bookkeeping_tool(e.tool) && e.status == tool_status::success;
      }));
}

std::size_t evidence_ledger::failed_execution_count() const noexcept {
  return static_cast<std::size_t>(
      std::count_if(tool_events_.begin(), tool_events_.end(), [](const tool_event& e) {
        return !is_bookkeeping_tool(e.tool) && e.failed();
      }));
}

bool evidence_ledger::has_successful_evidence() const noexcept {
  return successful_execution_count() > 0 || !artifacts_.empty();
}

bool evidence_ledger::failure_without_later_success() const noexcept {
  bool failed_since_success = false;
  for (const auto& e : tool_events_) {
    if (is_bookkeeping_tool(e.tool)) {
      continue;
    }
    if (e.failed()) {
      failed_since_success = true;
    } else if (e.status == tool_status::success) {
      failed_since_success = false;
    }
  }
  return failed_since_success;
}

bool evidence_ledger::has_terminal_blocker() const noexcept {
  return std::any_of(blockers_.begin(), blockers_.end(),
                     [](const blocker& b) { return b.terminal(); });
}

std::size_t evidence_ledger::referenceable_artifact_count() const noexcept {
  return static_cast<std::size_t>(std::count_if(
      artifacts_.begin(), artifacts_.end(), [](const artifact& a) { return a.referenceable(); }));
}

outcome evidence_ledger::evidence_outcome() const noexcept {
  const bool success = has_successful_evidence();
  if (success && !blockers_.empty()) {
    return outcome::partial;
  }
  if (success) {
    return outcome::success;
  }
  if (has_terminal_blocker()) {
    return outcome::blocked;
  }
  return outcome::unknown;
}

std::vector<std::pair<std::string, std::size_t>> evidence_ledger::tools_used() const {
  std::vector<std::pair<std::string, std::size_t>> used;
  for (const auto& e : tool_events_) {
    auto it = std::find_if(used.begin(), used.end(),
                           [&](const auto& entry) { return entry.first == e.tool; });
    if (it == used.end()) {
      used.emplace_back(e.tool, 1);
    } else {
      ++it->second;
    }
  }
  return used;
}

std::string evidence_ledger::summary_json() const {
  json_writer w;
  w.begin_object();
  w.key("tool_events").value(tool_events_.size());
  w.key("execution_calls").value(execution_call_count());
  w.key("successful_execution_calls").value(successful_execution_count());
  w.key("failed_execution_calls").value(failed_execution_count());
  w.key("artifact_count").value(artifacts_.size());
  w.key("evidence_outcome").value(to_string(evidence_outcome()));
  w.key("tools_used").begin_object();
  for (const auto& [tool, count] : tools_used()) {
    w.key(tool).value(count);
  }
  w.end_object();
  w.key("artifacts").begin_array();
  for (const auto& a : artifacts_) {
    w.begin_object().key("name").value(a.name);
    if (!a.file_id.empty()) {
      w.key("file_id").value(a.file_id);
    }
    if (!a.path.empty()) {
      w.key("path").value(a.path);
    }
    w.end_object();
  }
  w.end_array();
  w.key("blockers").begin_array();
  for (const auto& b : blockers_) {
    w.begin_object()
        .key("kind")
        .value(to_string(b.kind))
        .key("terminal")
        .value(b.terminal())
        .key("tool")
        .value(b.tool)
        .key("message")
        .value(summarize(b.message, 240))
        .end_object();
  }
  w.end_array();
  w.key("corrections").value(corrections_.size());
  w.end_object();
  return std::move(w).str();
}

} // namespace troupe::harness
