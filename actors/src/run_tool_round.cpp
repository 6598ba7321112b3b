// Tool rounds: every call of a round passes the pre-tool gate inside the actor (known
// tool, valid arguments, loop guard, contract, sub-agent depth); the plan and finish
// control tools are decided there too. The rest run in batches (consecutive
// concurrency-safe calls together, any other call alone), each in its own tool_call
// actor, sub_agent calls as child runs. When the last call has its result the round is
// judged (post-tool gate, a finish call's answer through the final gates) and the next
// LLM round starts, or the run ends.

#include <algorithm>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "run_state.hpp"
#include "sub_agent_policy.hpp"
#include "troupe/actors/tool_call.hpp"
#include "troupe/runtime/json_object.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/tools/control_tools.hpp"

namespace troupe::actors::detail {

void settle(call_slot& slot, tools::tool_result result, harness::tool_status status) {
  slot.result = std::move(result);
  slot.status = status;
  slot.done = true;
}

namespace {

std::string string_field(std::string_view json, std::string_view key) {
  auto object = json_object::parse(json);
  if (!object) {
    return {};
  }
  return object->text(key).value_or(std::nullopt).value_or(std::string());
}

const tools::argument_schema* schema_for(run_self self, const tools::tool_descriptor& d) {
  auto& schemas = self->state.schemas;
  if (auto it = schemas.find(d.name); it != schemas.end()) {
    return &it->second;
  }
  auto compiled = tools::argument_schema::compile(d.input_schema);
  if (!compiled) {
    return nullptr;
  }
  return &schemas.emplace(d.name, std::move(*compiled)).first->second;
}

void publish_action_finished(run_self self, const call_slot& slot) {
  json_writer w;
  w.begin_object().key("call_id").value(slot.call.id).key("tool").value(slot.call.name);
  w.key("status").value(harness::to_string(slot.status));
  w.key("duration_ms").value(slot.duration.count());
  w.key("output").value(harness::summarize(slot.result.content, 300)).end_object();
  publish(self, run_event_type::action_finished, std::move(w).str());
}

/// Decides, inside the actor, what happens to each call before anything runs.
void gate_calls(run_self self) {
  auto& st = self->state;
  for (std::size_t i = 0; i < st.calls.size(); ++i) {
    auto& slot = st.calls[i];
    const auto& name = slot.call.name;
    json_writer w;
    w.begin_object().key("call_id").value(slot.call.id).key("tool").value(name);
    w.key("arguments").value(harness::summarize(slot.call.arguments, 300)).end_object();
    publish(self, run_event_type::action_started, std::move(w).str());

    const tools::tool_descriptor* descriptor = nullptr;
    if (tools::is_control_tool(name)) {
      descriptor = name == "finish" ? &tools::finish_tool_descriptor()
                   : name == "plan" ? &tools::plan_tool_descriptor()
                                    : &tools::sub_agent_tool_descriptor();
    } else if (const auto* found = st.tools->find(name)) {
      slot.impl = found->impl;
      descriptor = &slot.impl->descriptor();
    }
    if (!descriptor) {
      std::string known;
      for (const auto& d : st.tool_defs) {
        known += (known.empty() ? "" : ", ") + d.name;
      }
      settle(slot,
             tools::tool_failure(
                 "not_found",
                 fmt::format("unknown tool '{}'; the tools you can call are: {}", name, known)),
             harness::tool_status::blocked);
      continue;
    }
    if (const auto* schema = schema_for(self, *descriptor)) {
      if (auto valid = schema->validate(slot.call.arguments); !valid) {
        settle(slot,
               tools::tool_failure("invalid_arguments", fmt::format("invalid arguments for {}: {}",
                                                                    name, valid.error().message)),
               harness::tool_status::error);
        continue;
      }
    }
    auto verdict = st.guard.check(name, slot.call.arguments);
    auto pre_tool = harness::validate_pre_tool(st.contract, name, verdict);
    if (name == "sub_agent" && st.spec.depth >= sub_agent_policy.max_depth) {
      pre_tool.allowed = false;
      pre_tool.violations.push_back(
          {harness::violation_code::tool_blocked_by_contract, harness::severity::critical,
           fmt::format("sub-agents may not nest deeper than {}", sub_agent_policy.max_depth),
           "Do the task yourself without sub_agent."});
    }
    // Every gate decision is a step, a clean pass included.
    harness_step(self, "validate_pre_tool", pre_tool.to_json(), pre_tool.allowed);
    if (!pre_tool.allowed) {
      settle(slot, tools::tool_failure("policy_blocked", pre_tool.violations.front().message),
             harness::tool_status::blocked);
      continue;
    }
    if (name == "plan") {
      auto r = run_plan_tool(st.plan, slot.call.arguments);
      const auto status = r.ok ? harness::tool_status::success : harness::tool_status::error;
      settle(slot, std::move(r), status);
      continue;
    }
    if (name == "finish") {
      // Judged after the round, once every other call has its result.
      settle(slot, {true, "", {}, {}}, harness::tool_status::success);
      continue;
    }
    slot.execute = true;
    slot.concurrency_safe = descriptor->concurrency_safe;
  }
}

void start_call(run_self self, std::size_t index) {
  auto& st = self->state;
  auto& slot = st.calls[index];
  slot.started = std::chrono::steady_clock::now();
  slot.launched = true;
  ++st.running_calls;
  if (slot.call.name == "sub_agent") {
    start_sub_agents(self, index);
    if (slot.done) {
      on_call_done(self, index);
    }
    return;
  }
  // Issue 19: a world-acting call waits for a human first.
  if (!slot.approved && slot.approval_id.empty()) {
    std::string reason;
    if (approval_needed(self, index, reason)) {
      request_approval(self, index, std::move(reason));
      return;
    }
  }
  launch_call(self, index);
}

} // namespace

void launch_call(run_self self, std::size_t index) {
  auto& st = self->state;
  auto& slot = st.calls[index];
  tools::tool_context context;
  context.workspace = st.spec.workspace;
  context.run_id = st.spec.run_id;
  context.call_id = slot.call.id;
  context.workspace_max_bytes = st.spec.io.workspace_max_bytes;
  // The memory tools' user: the sender of a shared channel thread, else the owner.
  context.user_row = st.spec.memory_owner();
  context.agent_row = st.spec.agent_row;
  context.conversation_row = st.spec.conversation_row;
  context.run_row = st.spec.run_row;
  context.memory_autoapprove = st.spec.agent.memory_autoapprove;
  context.skills = st.spec.agent.skills;
  context.http = st.spec.io.http;
  // One tool_call actor per call: it owns the call's coroutine and timeout, and dies with
  // the run (cancel_inflight also tells it to stop, which kills its processes).
  tool_call_spec call;
  call.impl = slot.impl;
  call.sandbox = st.spec.io.sandbox;
  call.arguments = slot.call.arguments;
  call.context = std::move(context);
  call.executor = st.spec.io.http->get_executor();
  call.timeout = st.spec.tool_timeout;
  auto actor = spawn_tool_call(self->system(), std::move(call), self->address());
  st.tool_calls.push_back(actor);
  const int round = st.round;
  auto settled = [self, index, round, actor](expected<tools::tool_result> r) {
    auto& s = self->state;
    std::erase(s.tool_calls, actor);
    if (s.finished || s.round != round || index >= s.calls.size() || s.calls[index].done) {
      return;
    }
    auto& sl = s.calls[index];
    if (!r) {
      settle(sl, tools::tool_failure("tool_error", r.error().message), harness::tool_status::error);
    } else {
      const auto status = r->ok ? harness::tool_status::success : harness::tool_status::error;
      settle(sl, std::move(*r), status);
    }
    on_call_done(self, index);
  };
  self->request(actor, caf::infinite, run_atom::value)
      .then([settled](tools::tool_result& r) { settled(std::move(r)); },
            [settled](caf::error& e) { settled(tl::unexpected(from_caf_error(e))); });
}

namespace {

void end_tool_round(run_self self);

/// Starts the next batch: a run of consecutive concurrency-safe calls in parallel, or
/// one other call alone.
void start_calls(run_self self) {
  auto& st = self->state;
  while (st.next_call < st.calls.size() && !st.calls[st.next_call].execute) {
    ++st.next_call;
  }
  if (st.next_call >= st.calls.size()) {
    end_tool_round(self);
    return;
  }
  const std::size_t first = st.next_call;
  if (!st.calls[first].concurrency_safe) {
    ++st.next_call;
    start_call(self, first);
    return;
  }
  std::vector<std::size_t> batch;
  while (st.next_call < st.calls.size() &&
         (!st.calls[st.next_call].execute || st.calls[st.next_call].concurrency_safe)) {
    if (st.calls[st.next_call].execute) {
      batch.push_back(st.next_call);
    }
    ++st.next_call;
  }
  for (auto i : batch) {
    start_call(self, i);
  }
}

} // namespace

void on_call_done(run_self self, std::size_t index) {
  auto& st = self->state;
  auto& slot = st.calls[index];
  slot.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - slot.started);
  publish_action_finished(self, slot);
  --st.running_calls;
  // While another call waits for a human, the round as it is now is what a restart
  // resumes.
  save_round(self);
  if (st.running_calls == 0) {
    start_calls(self);
  }
}

void continue_round(run_self self) {
  start_calls(self);
}

namespace {

void end_tool_round(run_self self) {
  auto& st = self->state;
  const auto first_event = st.ledger.tool_events().size();
  std::optional<std::size_t> finish_index;
  for (std::size_t i = 0; i < st.calls.size(); ++i) {
    auto& slot = st.calls[i];
    if (slot.call.name == "finish") {
      finish_index = i;
      continue;
    }
    harness::tool_event e;
    e.call_id = slot.call.id;
    e.tool = slot.call.name;
    e.arguments_summary = slot.call.arguments;
    e.output_summary = slot.result.content;
    e.status = slot.status;
    if (slot.status != harness::tool_status::success) {
      e.error = slot.result.content;
      // A tool that classified its own failure (an MCP server that died: tool_error, a
      // call past its limit: timeout) is taken at its word, not read from its text.
      e.failure_kind = harness::parse_blocker_kind(slot.result.failure_kind);
    }
    for (const auto& a : slot.result.artifacts) {
      e.files.push_back(a.path);
      harness::artifact file;
      file.name = std::filesystem::path(a.path).filename().string();
      file.path = a.path;
      file.mime = a.mime;
      file.size = a.size;
      file.call_id = slot.call.id;
      st.ledger.add_artifact(std::move(file));
    }
    e.duration = slot.duration;
    if (const auto* running = st.plan.running()) {
      e.plan_item_id = running->id;
    }
    e.round = st.round;
    st.ledger.record_tool(std::move(e));
    json_writer input;
    input.begin_object()
        .key("call_id")
        .value(slot.call.id)
        .key("arguments")
        .value(slot.call.arguments)
        .key("duration_ms")
        .value(slot.duration.count());
    input.end_object();
    record_step(self, "tool", slot.call.name, std::string(harness::to_string(slot.status)),
                std::move(input).str(), harness::summarize(slot.result.content, 2000));
    if (!slot.execute) {
      // Executed calls were announced as they finished.
      publish_action_finished(self, slot);
    }
  }
  std::span<const harness::tool_event> round_events(st.ledger.tool_events().data() + first_event,
                                                    st.ledger.tool_events().size() - first_event);
  auto post_tool = harness::validate_post_tool(round_events);
  st.ledger.record_validation(post_tool.to_event(st.round));
  harness_step(self, "validate_post_tool", post_tool.to_json(), post_tool.allowed);
  st.ledger.snapshot_plan(st.plan, st.round);
  if (harness::is_successful_tool_round(round_events)) {
    st.budget.reset();
  }
  if (finish_index) {
    auto& slot = st.calls[*finish_index];
    auto answer = string_field(slot.call.arguments, "answer");
    auto gate = final_gate(self, answer);
    if (gate.what == gate_result::kind::accepted) {
      slot.result.content = R"({"ok":true,"accepted":true})";
      publish_action_finished(self, slot);
    } else {
      slot.result = tools::tool_failure("final_answer_rejected", gate.text);
      slot.status = harness::tool_status::error;
      publish_action_finished(self, slot);
    }
    if (gate.what == gate_result::kind::accepted) {
      for (const auto& s : st.calls) {
        push_message(self,
                     chat_message{chat_role::tool, s.result.content, {}, s.call.id, s.call.name});
      }
      complete_run(self, std::move(gate.text));
      return;
    }
    if (gate.what == gate_result::kind::failed) {
      fail_run(self, std::move(gate.text));
      return;
    }
  }
  for (const auto& s : st.calls) {
    push_message(self, chat_message{chat_role::tool, s.result.content, {}, s.call.id, s.call.name});
  }
  if (!post_tool.violations.empty()) {
    std::string warnings = "Some tool calls failed:";
    for (const auto& v : post_tool.violations) {
      warnings += "\n- " + v.message;
    }
    // Shown to the model with the next round (not persisted: it is the harness talking).
    add_message(st, chat_message{chat_role::user, std::move(warnings), {}, {}, {}});
  }
  st.calls.clear();
  next_round(self);
}

} // namespace

void run_tool_round(run_self self, std::vector<tool_call> calls) {
  auto& st = self->state;
  if (st.spec.row_pending) {
    // Tools are given the run's and the conversation's rows (the memory tool names them as
    // a proposal's source): a round that comes before the run row's write has committed
    // waits for it. Rare and short: the write was sent before the model was asked. When
    // the write fails the run fails (on_run_row) and the round never starts.
    st.row_waiters.push_back([self, calls = std::move(calls)](bool ok) mutable {
      if (ok && !self->state.finished) {
        run_tool_round(self, std::move(calls));
      }
    });
    return;
  }
  st.calls.clear();
  for (std::size_t i = 0; i < calls.size(); ++i) {
    call_slot slot;
    slot.call = std::move(calls[i]);
    if (slot.call.id.empty()) {
      slot.call.id = fmt::format("call_{}_{}", st.round, i + 1);
    }
    st.calls.push_back(std::move(slot));
  }
  st.next_call = 0;
  st.running_calls = 0;
  gate_calls(self);
  start_calls(self);
}

} // namespace troupe::actors::detail
