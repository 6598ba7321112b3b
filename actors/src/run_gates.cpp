// The final-answer gates and corrections: a candidate answer (text of a round, or the
// `finish` tool's answer) passes the pre-final gate, gets links to the run's files, and
// passes the pre-save gate; a rejection spends the correction budget and becomes the
// prompt of a retry, or the run's failure once the budget is gone.

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "run_state.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::actors::detail {

namespace {

std::string harness_json(const harness::decision& d, const harness::evidence_ledger& ledger) {
  json_writer w;
  w.begin_object().key("decision").raw(d.to_json()).key("evidence").raw(ledger.summary_json());
  w.end_object();
  return std::move(w).str();
}

std::string codes_json(const std::vector<std::string>& codes, int round) {
  json_writer w;
  w.begin_object().key("round").value(round).key("violation_codes").begin_array();
  for (const auto& c : codes) {
    w.value(c);
  }
  w.end_array().end_object();
  return std::move(w).str();
}

/// The answer with a link to every referenceable artifact it does not mention yet.
std::string with_attachment_links(std::string answer, const harness::evidence_ledger& ledger) {
  std::string links;
  for (const auto& a : ledger.artifacts()) {
    const auto& ref = !a.path.empty() ? a.path : (!a.url.empty() ? a.url : a.file_id);
    if (ref.empty() || answer.find(ref) != std::string::npos) {
      continue;
    }
    links += fmt::format("\n- {}", ref);
  }
  if (!links.empty()) {
    answer += "\n\nFiles:" + links;
  }
  return answer;
}

} // namespace

void harness_step(run_self self, const std::string& name, std::string data_json, bool allowed) {
  record_step(self, "harness", name, allowed ? "done" : "rejected", "{}", data_json);
  publish(self, run_event_type::harness, std::move(data_json), name);
}

void retract_candidate(run_self self, const std::vector<std::string>& codes) {
  auto& st = self->state;
  if (st.candidate_streamed) {
    publish(self, run_event_type::model_correction, codes_json(codes, st.round));
    st.candidate_streamed = false;
  }
}

namespace {

gate_result correct(run_self self, const harness::decision& rejected,
                    const std::string& step_name) {
  auto& st = self->state;
  auto c = harness::correct_final(st.budget, rejected, st.ledger);
  st.ledger.record_correction(c.to_event(&rejected, st.round));
  retract_candidate(self, rejected.codes());
  const std::string name = c.reason == harness::correction_reason::progress_only
                               ? std::string("continue_execution")
                               : step_name;
  json_writer w;
  w.begin_object().key("attempt").value(c.attempt).key("max_attempts").value(c.max_attempts);
  w.key("sent").value(c.retry()).key("violation_codes").begin_array();
  for (const auto& code : rejected.codes()) {
    w.value(code);
  }
  w.end_array().end_object();
  harness_step(self, name, std::move(w).str(), c.retry());
  if (c.retry()) {
    return {gate_result::kind::retry, c.prompt};
  }
  return {gate_result::kind::failed, c.failure_message};
}

} // namespace

gate_result final_gate(run_self self, const std::string& answer) {
  auto& st = self->state;
  auto pre_final = harness::validate_pre_final(st.contract, st.ledger, st.plan, {answer, {}});
  st.ledger.record_validation(pre_final.to_event(st.round));
  harness_step(self, "validate_pre_final", harness_json(pre_final, st.ledger), pre_final.allowed);
  if (!pre_final.allowed) {
    return correct(self, pre_final, "correct_pre_final");
  }
  auto text = with_attachment_links(answer, st.ledger);
  auto pre_save = harness::validate_pre_save(st.contract, st.ledger, st.plan, {text, {}});
  st.ledger.record_validation(pre_save.to_event(st.round));
  harness_step(self, "validate_pre_save", harness_json(pre_save, st.ledger), pre_save.allowed);
  if (!pre_save.allowed) {
    return correct(self, pre_save, "correct_pre_save");
  }
  return {gate_result::kind::accepted, std::move(text)};
}

} // namespace troupe::actors::detail
