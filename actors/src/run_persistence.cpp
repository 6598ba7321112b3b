// What a run leaves behind: its events (to the subscriber, in order, numbered), its
// steps and messages (to the store_writer, which applies one sender's writes in order).
// A run without a run row writes nothing; its steps stay in its result.

#include <string>
#include <utility>

#include <fmt/format.h>

#include "run_state.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/storage/write_op.hpp"

namespace troupe::actors::detail {

std::string tool_calls_json(const std::vector<tool_call>& calls) {
  json_writer w;
  w.begin_array();
  for (const auto& c : calls) {
    w.begin_object().key("id").value(c.id).key("name").value(c.name);
    w.key("arguments").value(c.arguments).end_object();
  }
  w.end_array();
  return std::move(w).str();
}

void publish(run_self self, run_event_type type, std::string data_json, std::string harness_name) {
  auto& st = self->state;
  run_event e;
  e.run_id = st.spec.run_id;
  e.turn_id = st.spec.turn_id;
  e.seq = ++st.seq;
  e.type = type;
  e.harness_name = std::move(harness_name);
  e.created_at = unix_millis_now();
  e.data_json = std::move(data_json);
  if (st.subscriber) {
    self->send(st.subscriber, event_atom::value, std::move(e));
  }
}

void write(run_self self, storage::write_op op) {
  auto& writer = self->state.spec.io.writer;
  if (!writer || self->state.spec.run_row == 0) {
    return;
  }
  // A step or message that cannot be stored fails the run: what it would answer could
  // not be read back (history, steps, replay).
  auto failed = [self, what = op.what](const std::string& why) {
    auto message = fmt::format("the run could not store {}: {}", what, why);
    if (self->state.finished) {
      // Its final status write comes after this one and reports it.
      self->state.persistence_error = std::move(message);
    } else {
      fail_run(self, std::move(message));
    }
  };
  self->request(*writer, store_write_timeout, write_atom::value, std::move(op))
      .then(
          [failed](write_result& r) {
            if (!r) {
              failed(r.error().message);
            }
          },
          [failed](caf::error& e) { failed(from_caf_error(e).message); });
}

bool persists(const run_state& st) {
  return st.spec.io.writer && (st.spec.run_row != 0 || st.spec.row_pending);
}

void write_with_row(run_self self, row_write make) {
  auto& st = self->state;
  if (!st.spec.io.writer) {
    return;
  }
  if (st.spec.row_pending) {
    st.deferred_writes.push_back(std::move(make));
    return;
  }
  if (st.spec.run_row != 0) {
    write(self, make(st.spec.run_row, st.spec.conversation_row));
  }
}

void on_run_row(run_self self, storage::row_id row, storage::row_id conversation) {
  auto& st = self->state;
  if (!st.spec.row_pending) {
    return;
  }
  st.spec.row_pending = false;
  st.spec.run_row = row;
  if (st.spec.conversation_row == 0) {
    st.spec.conversation_row = conversation;
  }
  auto deferred = std::move(st.deferred_writes);
  st.deferred_writes.clear();
  if (row == 0) {
    // Nothing of the run can be stored: it fails, and says why.
    const std::string why = "the message was not stored, so the run's outcome cannot be kept";
    if (st.outcome_waits_for_row) {
      st.result.status = storage::run_status::failed;
      st.result.error = why;
      report_outcome(self);
    } else {
      fail_run(self, why);
    }
    return;
  }
  for (auto& make : deferred) {
    write(self, make(row, st.spec.conversation_row));
  }
  for (auto& waiter : std::exchange(st.row_waiters, {})) {
    waiter(true);
  }
  if (st.outcome_waits_for_row) {
    report_outcome(self);
  }
}

void record_step(run_self self, std::string kind, std::string name, std::string status,
                 std::string input_json, std::string output_json) {
  auto& st = self->state;
  st.result.steps.push_back(run_step{kind, name, status, output_json});
  if (!persists(st)) {
    return;
  }
  storage::execution_step_record step;
  step.kind = std::move(kind);
  step.name = std::move(name);
  step.status = std::move(status);
  step.input_json = std::move(input_json);
  step.output_json = std::move(output_json);
  step.created_at = unix_millis_now();
  write_with_row(self, [step = std::move(step)](storage::row_id run_row, storage::row_id) mutable {
    step.run_id = run_row;
    return storage::append_step_op(std::move(step));
  });
}

storage::message_span persist_message(run_self self, const chat_message& m,
                                      const token_usage* usage) {
  auto& st = self->state;
  // A run of a conversation created with it learns the conversation's row with its own.
  if ((st.spec.conversation_row == 0 && !st.spec.row_pending) || !persists(st)) {
    return {};
  }
  storage::message_record r;
  r.role = std::string(to_string(m.role));
  r.content = m.content;
  if (!m.tool_calls.empty()) {
    r.tool_calls_json = tool_calls_json(m.tool_calls);
  }
  r.tool_call_id = m.tool_call_id;
  if (usage) {
    r.prompt_tokens = static_cast<std::int64_t>(usage->prompt_tokens);
    r.completion_tokens = static_cast<std::int64_t>(usage->completion_tokens);
  }
  r.created_at = unix_millis_now();
  auto span = std::make_shared<storage::stored_span>();
  write_with_row(self, [r = std::move(r), span](storage::row_id run_row,
                                                storage::row_id conversation_row) mutable {
    r.run_id = run_row;
    r.conversation_id = conversation_row;
    auto op = storage::append_message_op(std::move(r));
    // On the writer's thread: later writes (a compression summary) read the row.
    op.applied = [span](std::int64_t id) { *span = storage::stored_span{id, id}; };
    return op;
  });
  return span;
}

void push_message(run_self self, chat_message m) {
  auto span = persist_message(self, m);
  add_message(self->state, std::move(m), std::move(span));
}

} // namespace troupe::actors::detail
