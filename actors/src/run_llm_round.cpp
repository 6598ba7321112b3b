// LLM rounds: the request (the agent's system prompt with the plan, the conversation,
// the offered tools), the streaming call as a coroutine on the io executor that sends
// text deltas back in batches, and the reading of its outcome: a fallback model on a
// transient provider failure, tool calls to the tool round, a final candidate to the
// gates, an unusable round to a correction.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <fmt/format.h>

#include "run_state.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/runtime/prompt/prompt_assembly.hpp"

namespace troupe::actors::detail {

namespace {

/// Sends the round's request (once the history is compressed, when it had to be).
void send_round(run_self self);

// -- the coroutine (never touches actor state: everything arrives as parameters) -------

/// Text deltas decoded from one network read, sent to the run as one message: the
/// decoder calls `add` for each event of a read, and the flush posted behind the first
/// one runs once that read is done. Used only on the client's executor (one strand).
struct delta_batch {
  run_actor target;
  int round = 0;
  std::string pending;
  bool flush_posted = false;

  void flush() {
    if (!pending.empty()) {
      caf::anon_send(target, delta_atom::value, round, std::exchange(pending, {}));
    }
  }
};

asio::awaitable<completion_outcome> llm_call(std::shared_ptr<net::provider_client> client,
                                             completion_request request, run_actor target,
                                             int round) {
  auto batch = std::make_shared<delta_batch>();
  batch->target = std::move(target);
  batch->round = round;
  auto executor = co_await asio::this_coro::executor;
  auto sink = [batch, executor](const stream_event& e) {
    if (e.type != stream_event::kind::text_delta || e.text.empty()) {
      return;
    }
    batch->pending += e.text;
    if (!batch->flush_posted) {
      batch->flush_posted = true;
      asio::post(executor, [batch] {
        batch->flush_posted = false;
        batch->flush();
      });
    }
  };
  auto outcome = co_await client->complete(std::move(request), std::move(sink));
  // Text still waiting goes out before the outcome does.
  batch->flush();
  co_return outcome;
}

void on_llm_outcome(run_self self, completion_outcome out) {
  auto& st = self->state;
  ++st.llm_calls;
  if (out.answer.usage) {
    st.result.usage.prompt_tokens += out.answer.usage->prompt_tokens;
    st.result.usage.completion_tokens += out.answer.usage->completion_tokens;
    st.result.usage.total_tokens += out.answer.usage->total_tokens;
  }
  bool interrupted = false;
  if (out.failure && out.failure->kind != provider_failure::truncated &&
      out.failure->kind != provider_failure::content_filtered) {
    const bool started = !out.answer.text.empty() || !out.answer.tool_calls.empty();
    if (!started) {
      json_writer failed;
      failed.begin_object().key("model").value(st.model);
      failed.key("failure").value(to_string(out.failure->kind));
      failed.key("started_at").value(st.round_started_at);
      failed.key("duration_ms").value(unix_millis_now() - st.round_started_at).end_object();
      record_step(self, "llm", "llm_round", "failed", "{}", std::move(failed).str());
      if (is_retryable(out.failure->kind) && !st.on_fallback &&
          !st.spec.agent.fallback_model.empty()) {
        // Transient failure: switch to the fallback model and keep it for the rest of
        // the run (the primary just failed after the client's own retries).
        st.on_fallback = true;
        st.model = st.spec.agent.fallback_model;
        harness_step(self, "switch_to_fallback_model",
                     fmt::format(R"({{"model":"{}","failure":"{}"}})", st.model,
                                 to_string(out.failure->kind)),
                     true);
        --st.round;
        next_round(self);
        return;
      }
      fail_run(self, fmt::format("the model provider failed: {}", out.failure->message));
      return;
    }
    interrupted = true;
  }
  std::vector<std::string> arguments;
  for (const auto& c : out.answer.tool_calls) {
    arguments.push_back(c.arguments);
  }
  const auto finish = out.answer.finish ? to_string(*out.answer.finish) : std::string_view{};
  auto kind = harness::classify_llm_round({finish, out.answer.text, arguments, interrupted});
  {
    json_writer w;
    w.begin_object().key("model").value(st.model).key("round").value(st.round);
    w.key("finish_reason").value(finish).key("kind").value(harness::to_string(kind));
    w.key("text_chars").value(out.answer.text.size());
    w.key("tool_calls").raw(tool_calls_json(out.answer.tool_calls));
    w.key("started_at").value(st.round_started_at);
    w.key("duration_ms").value(unix_millis_now() - st.round_started_at).end_object();
    record_step(self, "llm", "llm_round", "done", "{}", std::move(w).str());
  }
  switch (kind) {
    case harness::llm_round_kind::complete_tool_calls: {
      push_message(
          self, chat_message{chat_role::assistant, out.answer.text, out.answer.tool_calls, {}, {}});
      run_tool_round(self, std::move(out.answer.tool_calls));
      return;
    }
    case harness::llm_round_kind::final_candidate: {
      auto gate = final_gate(self, out.answer.text);
      if (gate.what == gate_result::kind::accepted) {
        complete_run(self, std::move(gate.text));
      } else if (gate.what == gate_result::kind::failed) {
        fail_run(self, std::move(gate.text));
      } else {
        add_message(st, chat_message{chat_role::assistant, out.answer.text, {}, {}, {}});
        add_message(st, chat_message{chat_role::user, std::move(gate.text), {}, {}, {}});
        next_round(self);
      }
      return;
    }
    default:
      break;
  }
  // An unusable round: a truncated tool call is never executed.
  auto d = harness::recover_llm_round(st.budget, kind);
  st.ledger.record_correction(d.to_event(nullptr, st.round));
  retract_candidate(self, {std::string(harness::to_string(kind))});
  harness_step(self, "recover_llm_round",
               fmt::format(R"({{"kind":"{}","attempt":{},"sent":{}}})", harness::to_string(kind),
                           d.attempt, d.retry() ? "true" : "false"),
               d.retry());
  if (!d.retry()) {
    fail_run(self, std::move(d.failure_message));
    return;
  }
  add_message(st, chat_message{chat_role::user, std::move(d.prompt), {}, {}, {}});
  next_round(self);
}

} // namespace

void next_round(run_self self) {
  auto& st = self->state;
  if (st.finished) {
    return;
  }
  const int max_rounds =
      st.spec.agent.max_rounds == 0 ? 50 : static_cast<int>(st.spec.agent.max_rounds);
  if (st.round >= max_rounds) {
    fail_run(self, fmt::format("the run reached its limit of {} rounds without an accepted "
                               "final answer",
                               max_rounds));
    return;
  }
  ++st.round;
  st.candidate_streamed = false;
  for (auto& text : st.steered) {
    // The conversation stored the steering message when it accepted it.
    add_message(st, chat_message{chat_role::user, std::move(text), {}, {}, {}});
  }
  st.steered.clear();
  // The history is compressed first when it has grown past the trigger.
  compress_context(self, false, [self](const compression_done&) { send_round(self); });
}

namespace {

void send_round(run_self self) {
  auto& st = self->state;
  if (st.finished) {
    return;
  }
  completion_request request;
  request.model = st.model;
  request.stream = true;
  (void)st.blocks.set(prompt::plan_block, st.plan.render());
  prompt::prompt_input input;
  input.system_prompt = st.spec.agent.system_prompt;
  input.blocks = &st.blocks;
  input.history = st.messages;
  input.pinned = st.objective_index;
  input.budget.context_window =
      st.spec.agent.context_window != 0 ? st.spec.agent.context_window : default_context_window;
  input.budget.reserved_tokens = st.tool_tokens;
  input.budget.history_max_tokens = st.spec.agent.history_max_tokens;
  auto assembled = prompt::assemble_prompt(input);
  if (assembled.dropped_messages != st.dropped_messages) {
    st.dropped_messages = assembled.dropped_messages;
    json_writer w;
    w.begin_object().key("round").value(st.round);
    w.key("dropped_messages").value(assembled.dropped_messages);
    w.key("dropped_tokens").value(assembled.dropped_tokens);
    w.key("estimated_tokens").value(assembled.estimated_tokens);
    w.key("budget_tokens").value(assembled.budget_tokens);
    w.key("fits").value(assembled.fits()).end_object();
    record_step(self, "llm", "context_budget", assembled.fits() ? "done" : "over_budget", "{}",
                std::move(w).str());
  }
  request.messages = std::move(assembled.messages);
  request.tools = st.tool_defs;
  request.web_search = st.spec.agent.web_search == web_search_mode::builtin;
  auto id = std::make_shared<std::uint64_t>(0);
  st.round_started_at = unix_millis_now();
  auto task =
      start_io(self, st.spec.io.http->get_executor(),
               llm_call(st.client, std::move(request), caf::actor_cast<run_actor>(self), st.round),
               [self, id](expected<completion_outcome> r) {
                 self->state.inflight.erase(*id);
                 if (self->state.finished) {
                   return;
                 }
                 if (!r) {
                   fail_run(self, r.error().message);
                   return;
                 }
                 on_llm_outcome(self, std::move(*r));
               });
  *id = track(self, std::move(task));
}

} // namespace

void on_delta(run_self self, int round, std::string text) {
  auto& st = self->state;
  if (st.finished || round != st.round) {
    return;
  }
  st.candidate_streamed = true;
  json_writer w;
  w.begin_object().key("text").value(text).key("round").value(round);
  w.key("candidate").value(true).end_object();
  publish(self, run_event_type::model_delta, std::move(w).str());
}

} // namespace troupe::actors::detail
