// Approvals inside a run (issue 19): a tool call whose approval mode asks for a human
// (approval.hpp) is stored as a pending approval, announced (a step and the SSE event
// `approval`) and waits: the run actor holds no thread and makes no model call, it only
// waits for (approval_atom …) from a decision or (approval_expire_atom) from its own
// delayed send. Approved, the tool runs once; denied or expired, the call's result is a
// policy_blocked failure the harness records as blocker evidence.
//
// While a call waits, the round (its calls and their state) is saved on the run's pending
// approvals; the node's stop leaves such a run as it is, and the next start resumes it
// from that round (resume_round). The run's deadline does not count the time it waits.

#include <algorithm>

#include <fmt/format.h>

#include "run_state.hpp"
#include "troupe/actors/approval_registry.hpp"
#include "troupe/runtime/approval.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/json_object.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/storage/approvals.hpp"

namespace troupe::actors::detail {

namespace {

std::chrono::seconds timeout_of(const run_state& st) {
  return st.spec.agent.approval_timeout_s != 0
             ? std::chrono::seconds(st.spec.agent.approval_timeout_s)
             : st.spec.io.approval_timeout;
}

call_slot* slot_of(run_state& st, std::string_view id, std::size_t* index = nullptr) {
  for (std::size_t i = 0; i < st.calls.size(); ++i) {
    if (st.calls[i].approval_id == id && !st.calls[i].done) {
      if (index != nullptr) {
        *index = i;
      }
      return &st.calls[i];
    }
  }
  return nullptr;
}

bool waiting(const call_slot& slot) {
  return !slot.done && !slot.approval_id.empty() && !slot.approved;
}

void announce_decision(run_self self, const call_slot& slot, std::string_view decision,
                       std::int64_t decided_by, const std::string& note) {
  json_writer w;
  w.begin_object().key("id").value(slot.approval_id).key("tool").value(slot.call.name);
  w.key("call_id").value(slot.call.id).key("decision").value(decision);
  w.key("decided_by").value(decided_by).key("note").value(note).end_object();
  auto data = std::move(w).str();
  record_step(self, "approval", slot.call.name, std::string(decision), "{}", data);
  publish(self, run_event_type::approval, std::move(data));
}

void deny(run_self self, std::size_t index, std::string message) {
  auto& slot = self->state.calls[index];
  settle(slot, tools::tool_failure("policy_blocked", message), harness::tool_status::blocked);
  on_call_done(self, index);
}

std::string denied_message(const call_slot& slot, const std::string& note) {
  return fmt::format("a human denied the call of '{}'{}; it was not run: do not claim its result",
                     slot.call.name, note.empty() ? std::string() : " (" + note + ")");
}

std::string expired_message(const run_state& st, const call_slot& slot) {
  return fmt::format("nobody approved the call of '{}' within {} s, so it was denied and not run",
                     slot.call.name, timeout_of(st).count());
}

/// Where call `i` of the round stands, as the saved round says it.
std::string_view state_of(const call_slot& slot) {
  if (slot.done) {
    return "done";
  }
  if (waiting(slot)) {
    return "waiting";
  }
  return slot.launched ? "running" : "queued";
}

std::string round_json(const run_state& st) {
  json_writer w;
  w.begin_object().key("round").value(st.round).key("seq").value(st.seq);
  w.key("next_call").value(st.next_call).key("calls").begin_array();
  for (const auto& s : st.calls) {
    w.begin_object().key("id").value(s.call.id).key("name").value(s.call.name);
    w.key("arguments").value(s.call.arguments).key("state").value(state_of(s));
    w.key("execute").value(s.execute).key("concurrency_safe").value(s.concurrency_safe);
    w.key("approval_id").value(s.approval_id);
    if (s.done) {
      w.key("ok").value(s.result.ok).key("content").value(s.result.content);
      w.key("failure_kind").value(s.result.failure_kind);
      w.key("status").value(harness::to_string(s.status));
      w.key("artifacts").begin_array();
      for (const auto& a : s.result.artifacts) {
        w.begin_object().key("path").value(a.path).key("mime").value(a.mime);
        w.key("size").value(a.size).end_object();
      }
      w.end_array();
    }
    w.end_object();
  }
  w.end_array().end_object();
  return std::move(w).str();
}

/// Notes the start or the end of a wait for a human; a deadline that came meanwhile is
/// looked at again once the wait ends.
void note_wait(run_self self) {
  auto& st = self->state;
  const bool waits = waits_for_human(st);
  const auto now = std::chrono::steady_clock::now();
  if (waits && !st.waiting_since) {
    st.waiting_since = now;
  } else if (!waits && st.waiting_since) {
    st.waited += now - *st.waiting_since;
    st.waiting_since.reset();
    if (std::exchange(st.deadline_due, false)) {
      self->send(self, deadline_atom::value);
    }
  }
}

void forget_live(run_state& st, const std::string& id) {
  if (st.spec.io.approvals) {
    st.spec.io.approvals->forget(id);
  }
}

} // namespace

bool waits_for_human(const run_state& st) {
  return std::any_of(st.calls.begin(), st.calls.end(), waiting);
}

void save_round(run_self self) {
  auto& st = self->state;
  note_wait(self);
  if (!waits_for_human(st) || !persists(st)) {
    return;
  }
  write(self, storage::make_write("save the paused round",
                                  [run = st.spec.run_id, json = round_json(st)](
                                      storage::connection& c) -> expected<std::int64_t> {
                                    auto saved = storage::save_paused_round(c, run, json);
                                    if (!saved) {
                                      return tl::unexpected(saved.error());
                                    }
                                    return 0;
                                  }));
}

bool approval_needed(run_self self, std::size_t index, std::string& reason) {
  auto& st = self->state;
  const auto& slot = st.calls[index];
  if (!slot.impl) {
    return false;
  }
  approval_inputs in;
  in.tool = slot.call.name;
  in.tool_default = slot.impl->approval();
  in.agent_overrides = &st.spec.agent.approval;
  in.profile = st.spec.agent.approval_profile;
  in.writes_over_http = slot.impl->writes_over_http();
  const auto mode = approval_for(in);
  if (!needs_approval(mode, slot.call.name, st.spec.objective)) {
    return false;
  }
  reason = mode == approval_mode::always
               ? fmt::format("every call of '{}' needs a human's approval (approval = always)",
                             slot.call.name)
               : fmt::format("'{}' acts in the world and the user's message did not ask for it "
                             "(approval = agent_initiated)",
                             slot.call.name);
  return true;
}

void request_approval(run_self self, std::size_t index, std::string reason) {
  auto& st = self->state;
  auto& slot = st.calls[index];
  if (!st.spec.io.approvals || !st.spec.io.writer || st.spec.run_row == 0) {
    deny(self, index,
         fmt::format("the call of '{}' needs a human's approval ({}), and this run cannot wait "
                     "for one; it was not run",
                     slot.call.name, reason));
    return;
  }
  const auto timeout = timeout_of(st);
  storage::approval_record row;
  row.uuid = new_uuid();
  row.run_uuid = st.spec.run_id;
  // In a channel thread the senders share, the sender whose message started the run.
  row.owner_user_id = st.spec.memory_owner();
  row.agent = st.spec.agent.name;
  row.tool = slot.call.name;
  row.call_id = slot.call.id;
  row.arguments = slot.call.arguments.empty() ? "{}" : slot.call.arguments;
  row.reason = reason;
  row.created_at = storage::now_millis();
  row.expires_at =
      row.created_at + std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
  slot.approval_id = row.uuid;
  row.round_json = round_json(st);
  // Announced once the row is stored: whoever sees the event can decide at once.
  auto stored = [self, index, id = row.uuid, reason, timeout](bool ok, std::string why) {
    auto& s = self->state;
    std::size_t at = 0;
    auto* waiting = slot_of(s, id, &at);
    if (s.finished || waiting == nullptr || at != index) {
      return;
    }
    if (!ok) {
      deny(self, index,
           fmt::format("the approval for '{}' could not be stored ({}); it was not run",
                       waiting->call.name, why));
      return;
    }
    s.spec.io.approvals->add(id, caf::actor_cast<run_actor>(self));
    json_writer w;
    w.begin_object().key("id").value(id).key("tool").value(waiting->call.name);
    w.key("arguments").raw(waiting->call.arguments.empty() ? "{}" : waiting->call.arguments);
    w.key("reason").value(reason).key("call_id").value(waiting->call.id);
    w.key("timeout_s").value(static_cast<std::int64_t>(timeout.count())).end_object();
    auto data = std::move(w).str();
    record_step(self, "approval", waiting->call.name, "pending", "{}", data);
    publish(self, run_event_type::approval, std::move(data));
    self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(timeout),
                       approval_expire_atom::value, id);
    save_round(self);
  };
  auto op = storage::make_write("store approval",
                                [row](storage::connection& c) -> expected<std::int64_t> {
                                  return storage::insert_approval(c, row);
                                });
  self->request(*st.spec.io.writer, store_write_timeout, write_atom::value, std::move(op))
      .then(
          [stored](write_result& r) {
            stored(static_cast<bool>(r), r ? std::string() : r.error().message);
          },
          [stored](caf::error& e) { stored(false, from_caf_error(e).message); });
}

void on_approval(run_self self, const std::string& id, bool approved, std::string note,
                 std::int64_t decided_by) {
  auto& st = self->state;
  std::size_t index = 0;
  auto* slot = slot_of(st, id, &index);
  if (st.finished || slot == nullptr || slot->approved) {
    return;
  }
  announce_decision(self, *slot, approved ? "approved" : "denied", decided_by, note);
  if (approved) {
    slot->approved = true;
    launch_call(self, index);
    save_round(self);
    return;
  }
  deny(self, index, denied_message(*slot, note));
}

void on_approval_expired(run_self self, const std::string& id) {
  auto& st = self->state;
  std::size_t index = 0;
  auto* slot = slot_of(st, id, &index);
  if (st.finished || slot == nullptr || slot->approved) {
    return;
  }
  // A decision that claimed it first is on its way: it decides.
  if (st.spec.io.approvals->claim(id) != approvals_facade::claim_result::claimed) {
    return;
  }
  st.spec.io.approvals->forget(id);
  write(self, storage::make_write("expire approval",
                                  [id](storage::connection& c) -> expected<std::int64_t> {
                                    auto done = storage::decide_approval(
                                        c, id, "expired", 0, "no decision before the deadline");
                                    if (!done) {
                                      return tl::unexpected(done.error());
                                    }
                                    return 0;
                                  }));
  announce_decision(self, *slot, "expired", 0, "no decision before the deadline");
  deny(self, index, expired_message(st, *slot));
}

void abandon_approvals(run_self self) {
  auto& st = self->state;
  if (!st.spec.io.approvals) {
    return;
  }
  for (auto& slot : st.calls) {
    if (!waiting(slot)) {
      continue;
    }
    if (st.spec.io.approvals->claim(slot.approval_id) != approvals_facade::claim_result::claimed) {
      continue;
    }
    st.spec.io.approvals->forget(slot.approval_id);
    auto id = slot.approval_id;
    write(self, storage::make_write(
                    "expire approval", [id](storage::connection& c) -> expected<std::int64_t> {
                      auto done = storage::decide_approval(c, id, "expired", 0, "the run ended");
                      if (!done) {
                        return tl::unexpected(done.error());
                      }
                      return 0;
                    }));
  }
}

void on_deadline(run_self self) {
  auto& st = self->state;
  if (st.finished) {
    return;
  }
  if (waits_for_human(st)) {
    st.deadline_due = true;
    return;
  }
  const auto due = st.started_at + st.spec.agent.timeout + st.waited;
  const auto now = std::chrono::steady_clock::now();
  if (now < due) {
    self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(due - now),
                       deadline_atom::value);
    return;
  }
  finish_run(self, storage::run_status::cancelled, {},
             "the run reached its deadline and was cancelled");
}

void on_shutdown(run_self self) {
  auto& st = self->state;
  if (st.finished) {
    return;
  }
  // Only a top-level run whose rows are all written can be resumed from them.
  if (!waits_for_human(st) || !persists(st) || st.spec.row_pending || st.spec.depth > 0) {
    finish_run(self, storage::run_status::cancelled, {}, "the run was cancelled");
    return;
  }
  st.finished = true;
  cancel_inflight(self);
  for (const auto& slot : st.calls) {
    if (waiting(slot)) {
      forget_live(st, slot.approval_id);
    }
  }
  log::info("run {} waits for a human's approval: it is resumed at the next start", st.spec.run_id);
  // The caller (the conversation, stopping too) gets no answer; the rows say `running`,
  // the approvals pending, and the round is saved.
  self->quit();
}

void resume_round(run_self self) {
  auto& st = self->state;
  const auto& resume = *st.spec.resume;
  const auto unusable = [&](const std::string& why) {
    fail_run(self, fmt::format("the run waited for a human's approval when troupe stopped, and "
                               "could not be resumed: {}",
                               why));
  };
  auto saved = json_object::parse(resume.round_json.empty() ? "{}" : resume.round_json);
  if (!saved) {
    unusable(saved.error().message);
    return;
  }
  auto round = saved->integer("round");
  auto next = saved->integer("next_call");
  auto calls = saved->objects("calls");
  if (!round || !*round || !next || !*next || !calls || calls->empty()) {
    unusable("its saved round is incomplete");
    return;
  }
  st.round = static_cast<int>(**round);
  st.calls.clear();
  std::size_t interrupted = 0;
  std::vector<std::size_t> waits;
  for (const auto& c : *calls) {
    call_slot slot;
    slot.call.id = c.text("id").value_or(std::nullopt).value_or(std::string());
    slot.call.name = c.text("name").value_or(std::nullopt).value_or(std::string());
    slot.call.arguments = c.text("arguments").value_or(std::nullopt).value_or(std::string());
    slot.approval_id = c.text("approval_id").value_or(std::nullopt).value_or(std::string());
    slot.execute = c.boolean("execute").value_or(std::nullopt).value_or(false);
    slot.concurrency_safe = c.boolean("concurrency_safe").value_or(std::nullopt).value_or(false);
    slot.started = std::chrono::steady_clock::now();
    if (const auto* found = st.tools->find(slot.call.name)) {
      slot.impl = found->impl;
    }
    const auto state = c.text("state").value_or(std::nullopt).value_or(std::string());
    if (state == "done") {
      tools::tool_result r;
      r.ok = c.boolean("ok").value_or(std::nullopt).value_or(false);
      r.content = c.text("content").value_or(std::nullopt).value_or(std::string());
      r.failure_kind = c.text("failure_kind").value_or(std::nullopt).value_or(std::string());
      if (auto artifacts = c.objects("artifacts")) {
        for (const auto& a : *artifacts) {
          tools::tool_artifact file;
          file.path = a.text("path").value_or(std::nullopt).value_or(std::string());
          file.mime = a.text("mime").value_or(std::nullopt).value_or(std::string());
          file.size = static_cast<std::uint64_t>(
              std::max<std::int64_t>(0, a.integer("size").value_or(std::nullopt).value_or(0)));
          r.artifacts.push_back(std::move(file));
        }
      }
      settle(slot, std::move(r),
             harness::tool_status_from(
                 c.text("status").value_or(std::nullopt).value_or(std::string())));
    } else if (state == "running") {
      slot.launched = true;
      settle(slot,
             tools::tool_failure("tool_error",
                                 "troupe stopped while this call ran; whether it took effect is "
                                 "unknown, and it was not run again"),
             harness::tool_status::error);
      ++interrupted;
    } else if (state == "waiting" && !slot.approval_id.empty()) {
      slot.launched = true;
      waits.push_back(st.calls.size());
    } else if (state == "waiting") {
      unusable("a waiting call has no approval");
      return;
    }
    st.calls.push_back(std::move(slot));
  }
  st.next_call = std::min<std::size_t>(static_cast<std::size_t>(std::max<std::int64_t>(0, **next)),
                                       st.calls.size());
  st.running_calls = waits.size();
  {
    json_writer w;
    w.begin_object().key("round").value(st.round).key("calls").value(st.calls.size());
    w.key("waiting").value(waits.size()).key("interrupted").value(interrupted).end_object();
    harness_step(self, "resume_after_restart", std::move(w).str(), true);
  }
  if (waits.empty()) {
    continue_round(self);
    return;
  }
  // Each waiting call waits again, or takes the decision made while the run was away.
  const auto now = storage::now_millis();
  const int resumed_round = st.round;
  for (const auto index : waits) {
    if (st.finished || st.round != resumed_round) {
      break;
    }
    auto& slot = st.calls[index];
    const auto id = slot.approval_id;
    const auto found =
        std::find_if(resume.approvals.begin(), resume.approvals.end(),
                     [&](const storage::approval_record& a) { return a.uuid == id; });
    if (found == resume.approvals.end()) {
      deny(self, index,
           fmt::format("the approval of the call of '{}' was lost in a restart; it was not run",
                       slot.call.name));
      continue;
    }
    if (found->status == "pending") {
      const auto left =
          std::chrono::milliseconds(std::max<std::int64_t>(0, found->expires_at - now));
      // Announced again (the same id): followers of the resumed run learn it waits.
      json_writer w;
      w.begin_object().key("id").value(id).key("tool").value(slot.call.name);
      w.key("arguments").raw(found->arguments.empty() ? "{}" : found->arguments);
      w.key("reason").value(found->reason).key("call_id").value(slot.call.id);
      w.key("timeout_s").value(std::chrono::duration_cast<std::chrono::seconds>(left).count());
      w.key("resumed").value(true).end_object();
      publish(self, run_event_type::approval, std::move(w).str());
      self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(left),
                         approval_expire_atom::value, id);
      // Last: a decision kept while the run was away arrives now.
      st.spec.io.approvals->add(id, caf::actor_cast<run_actor>(self));
      continue;
    }
    forget_live(st, id);
    announce_decision(self, slot, found->status, found->decided_by, found->note);
    if (found->status == "approved") {
      slot.approved = true;
      launch_call(self, index);
    } else if (found->status == "denied") {
      deny(self, index, denied_message(slot, found->note));
    } else {
      deny(self, index, expired_message(st, slot));
    }
  }
  if (!st.finished && st.round == resumed_round) {
    save_round(self);
  }
}

} // namespace troupe::actors::detail
