// Approvals inside a run (issue 19): a tool call whose approval mode asks for a human
// (approval.hpp) is stored as a pending approval, announced (a step and the SSE event
// `approval`) and waits: the run actor holds no thread and makes no model call, it only
// waits for (approval_atom …) from a decision or (approval_expire_atom) from its own
// delayed send. Approved, the tool runs once; denied or expired, the call's result is a
// policy_blocked failure the harness records as blocker evidence.

#include <fmt/format.h>

#include "run_state.hpp"
#include "troupe/actors/approval_registry.hpp"
#include "troupe/runtime/approval.hpp"
#include "troupe/runtime/crypto.hpp"
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

} // namespace

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
  row.owner_user_id = st.spec.owner_user;
  row.agent = st.spec.agent.name;
  row.tool = slot.call.name;
  row.call_id = slot.call.id;
  row.arguments = slot.call.arguments.empty() ? "{}" : slot.call.arguments;
  row.reason = reason;
  row.created_at = storage::now_millis();
  row.expires_at =
      row.created_at + std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
  slot.approval_id = row.uuid;
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
  if (st.finished || slot == nullptr) {
    return;
  }
  announce_decision(self, *slot, approved ? "approved" : "denied", decided_by, note);
  if (approved) {
    slot->approved = true;
    launch_call(self, index);
    return;
  }
  deny(self, index,
       fmt::format("a human denied the call of '{}'{}; it was not run: do not claim its result",
                   slot->call.name, note.empty() ? std::string() : " (" + note + ")"));
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
  deny(self, index,
       fmt::format("nobody approved the call of '{}' within {} s, so it was denied and not run",
                   slot->call.name, timeout_of(st).count()));
}

void abandon_approvals(run_self self) {
  auto& st = self->state;
  if (!st.spec.io.approvals) {
    return;
  }
  for (auto& slot : st.calls) {
    if (slot.approval_id.empty() || slot.done || slot.approved) {
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

} // namespace troupe::actors::detail
