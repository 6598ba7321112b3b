// The conversation's wait for its active run, and the guard on it (issue 19): the
// conversation waits for a run no longer than the agent's timeout and a grace, plus the
// time the run waits for a human's approval (the run's own deadline leaves that time out
// too). The run's `approval` events tell when a wait begins (a pending approval, with
// `timeout_s`) and ends (a decision); while one lasts, the guard waits with it.

#include <fmt/format.h>

#include "conversation_state.hpp"
#include "troupe/actors/bridge.hpp"

namespace troupe::actors::detail {

namespace {

// How long a conversation waits for a run beyond the run's own deadline.
constexpr auto run_grace = std::chrono::seconds(30);

caf::timespan guard_limit(const conversation_state& st) {
  return std::chrono::duration_cast<caf::timespan>(st.spec.agent.timeout) +
         std::chrono::duration_cast<caf::timespan>(run_grace);
}

} // namespace

void await_run(conversation_self self) {
  auto& st = self->state;
  st.launched_at = std::chrono::steady_clock::now();
  st.human_waits = 0;
  st.waiting_since.reset();
  st.waited = {};
  st.run_answered = false;
  // No timeout on the request itself: the guard is the limit (a human's approval moves
  // it, as it moves the run's deadline).
  const auto turn = st.turns;
  self->request(st.current, caf::infinite, run_atom::value)
      .then(
          [self, turn](run_result& r) {
            if (self->state.turns != turn || std::exchange(self->state.run_answered, true)) {
              return;
            }
            on_run_done(self, std::move(r));
          },
          [self, turn](caf::error& e) {
            if (self->state.turns != turn || std::exchange(self->state.run_answered, true)) {
              return;
            }
            // A crashed run fails its turn; the conversation goes on.
            run_result r;
            r.status = storage::run_status::failed;
            r.error = fmt::format("the run ended without a result: {}", from_caf_error(e).message);
            on_run_done(self, std::move(r));
          });
  self->delayed_send(self, guard_limit(st), guard_atom::value, turn);
}

void note_approval_event(conversation_state& st, const run_event& e) {
  const auto now = std::chrono::steady_clock::now();
  if (e.data_json.find("\"timeout_s\"") != std::string::npos) {
    if (st.human_waits++ == 0) {
      st.waiting_since = now;
    }
  } else if (e.data_json.find("\"decision\"") != std::string::npos && st.human_waits > 0) {
    if (--st.human_waits == 0 && st.waiting_since) {
      st.waited += now - *st.waiting_since;
      st.waiting_since.reset();
    }
  }
}

void on_guard(conversation_self self, std::uint64_t turn) {
  auto& st = self->state;
  if (turn != st.turns || !st.current || st.run_answered) {
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  const auto limit = guard_limit(st);
  if (st.human_waits > 0) {
    self->delayed_send(self, limit, guard_atom::value, turn);
    return;
  }
  const auto due = st.launched_at + limit + st.waited;
  if (now < due) {
    self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(due - now),
                       guard_atom::value, turn);
    return;
  }
  st.run_answered = true;
  self->send(st.current, cancel_atom::value);
  run_result r;
  r.status = storage::run_status::failed;
  r.error = "the run ended without a result: it did not answer within its deadline";
  on_run_done(self, std::move(r));
}

} // namespace troupe::actors::detail
