#include "troupe/actors/run.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <fmt/format.h>
#include <simdjson.h>

#include "troupe/actors/bridge.hpp"
#include "troupe/actors/tool_call.hpp"
#include "troupe/runtime/harness/correction_policy.hpp"
#include "troupe/runtime/harness/loop_guard.hpp"
#include "troupe/runtime/harness/plan_state.hpp"
#include "troupe/runtime/harness/task_contract.hpp"
#include "troupe/runtime/harness/validators.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/storage/write_op.hpp"
#include "troupe/tools/argument_validator.hpp"
#include "troupe/tools/control_tools.hpp"

namespace troupe::actors {

namespace {

using delta_atom = caf::atom_constant<caf::atom("delta")>;
using deadline_atom = caf::atom_constant<caf::atom("deadline")>;

constexpr auto write_timeout = std::chrono::seconds(30);
// How long a parent waits for a child beyond the child's own deadline.
constexpr auto child_grace = std::chrono::seconds(10);

/// One tool call of the current round, from the gate to its result.
struct call_slot {
  tool_call call;
  std::shared_ptr<const tools::tool> impl;
  /// Runs on the io executor (false: decided inside the actor).
  bool execute = false;
  bool concurrency_safe = false;
  bool done = false;
  tools::tool_result result;
  harness::tool_status status = harness::tool_status::success;
  std::chrono::steady_clock::time_point started;
  std::chrono::milliseconds duration{0};
  /// sub_agent: children still running and their answers in task order.
  std::size_t children_pending = 0;
  std::vector<std::string> child_answers;
  std::vector<bool> child_ok;
};

/// The outcome of a final gate.
struct gate_result {
  enum class kind { accepted, retry, failed };
  kind what = kind::accepted;
  /// accepted: the answer as delivered; retry: the correction prompt; failed: the message.
  std::string text;
};

struct run_state {
  run_spec spec;
  caf::actor subscriber;
  harness::task_contract contract;
  harness::evidence_ledger ledger;
  harness::plan_state plan;
  harness::correction_budget budget;
  harness::loop_guard guard;
  std::shared_ptr<net::provider_client> client;
  std::vector<chat_message> messages;
  std::vector<tool_definition> tool_defs;
  std::map<std::string, tools::argument_schema, std::less<>> schemas;
  std::string model;
  bool on_fallback = false;
  int round = 0;
  int llm_calls = 0;
  std::uint64_t seq = 0;
  bool started = false;
  bool finished = false;
  bool candidate_streamed = false;
  caf::response_promise promise;
  std::map<std::uint64_t, io_task> inflight;
  std::uint64_t next_task = 0;
  std::vector<caf::actor> children;
  /// User messages steered into the run, for the next LLM round.
  std::vector<std::string> steered;
  std::vector<call_slot> calls;
  std::size_t next_call = 0;
  std::size_t running_calls = 0;
  run_result result;
};

using run_actor = caf::stateful_actor<run_state>;

// -- JSON helpers ----------------------------------------------------------------------

std::string string_field(std::string_view json, std::string_view key) {
  simdjson::dom::parser parser;
  simdjson::padded_string buffer(json);
  simdjson::dom::element root;
  if (parser.parse(buffer).get(root) != simdjson::SUCCESS) {
    return {};
  }
  std::string_view value;
  if (root[key].get_string().get(value) != simdjson::SUCCESS) {
    return {};
  }
  return std::string(value);
}

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

std::string plan_json(const harness::plan_state& plan) {
  json_writer w;
  w.begin_object().key("ok").value(true).key("plan").begin_array();
  for (const auto& item : plan.items()) {
    w.begin_object().key("id").value(item.id).key("title").value(item.title);
    w.key("status").value(harness::to_string(item.status));
    if (!item.reason.empty()) {
      w.key("reason").value(item.reason);
    }
    w.end_object();
  }
  w.end_array().end_object();
  return std::move(w).str();
}

/// Executes the `plan` tool against the run's plan.
tools::tool_result run_plan_tool(harness::plan_state& plan, std::string_view arguments) {
  simdjson::dom::parser parser;
  simdjson::padded_string buffer(arguments);
  simdjson::dom::element root;
  if (parser.parse(buffer).get(root) != simdjson::SUCCESS) {
    return tools::tool_failure("invalid_arguments", "the arguments are not valid JSON");
  }
  std::string_view action;
  if (root["action"].get_string().get(action) != simdjson::SUCCESS) {
    return tools::tool_failure("invalid_arguments", "action is required");
  }
  auto text = [&](simdjson::dom::element e, std::string_view key) {
    std::string_view v;
    return e[key].get_string().get(v) == simdjson::SUCCESS ? std::string(v) : std::string();
  };
  expected<void> applied;
  if (action == "read") {
    return {true, plan_json(plan), {}, {}};
  }
  if (action == "set" || action == "revise") {
    simdjson::dom::array items;
    if (root["items"].get_array().get(items) != simdjson::SUCCESS) {
      return tools::tool_failure("invalid_arguments", "items is required for set and revise");
    }
    std::vector<harness::plan_item_spec> specs;
    for (auto item : items) {
      harness::plan_item_spec s;
      s.id = text(item, "id");
      s.title = text(item, "title");
      s.detail = text(item, "detail");
      s.reason = text(item, "reason");
      if (auto status = text(item, "status"); !status.empty()) {
        auto parsed = harness::parse_plan_status(status);
        if (!parsed) {
          return tools::tool_failure("invalid_arguments", parsed.error().message);
        }
        s.status = *parsed;
      }
      specs.push_back(std::move(s));
    }
    applied = action == "set" ? plan.set(std::move(specs)) : plan.revise(std::move(specs));
  } else if (action == "update") {
    auto status = harness::parse_plan_status(text(root, "status"));
    if (!status) {
      return tools::tool_failure("invalid_arguments", status.error().message);
    }
    applied = plan.update(text(root, "id"), *status, text(root, "reason"));
  } else {
    return tools::tool_failure("invalid_arguments", "action must be set, update, revise or read");
  }
  if (!applied) {
    return tools::tool_failure("invalid_arguments", applied.error().message);
  }
  return {true, plan_json(plan), {}, {}};
}

// -- coroutines (never touch actor state: everything arrives as parameters) ------------

/// Text deltas decoded from one network read, sent to the run as one message: the
/// decoder calls `add` for each event of a read, and the flush posted behind the first
/// one runs once that read is done. Used only on the client's executor (one strand).
struct delta_batch {
  caf::actor target;
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
                                             completion_request request, caf::actor target,
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

// -- events, steps, writes ---------------------------------------------------------------

void publish(run_actor* self, run_event_type type, std::string data_json,
             std::string harness_name = {}) {
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

void write(run_actor* self, storage::write_op op) {
  auto& writer = self->state.spec.io.writer;
  if (!writer || self->state.spec.run_row == 0) {
    return;
  }
  self->request(*writer, write_timeout, write_atom::value, std::move(op))
      .then([](write_result&) {}, [](caf::error&) {});
}

void record_step(run_actor* self, std::string kind, std::string name, std::string status,
                 std::string input_json, std::string output_json) {
  auto& st = self->state;
  st.result.steps.push_back(run_step{kind, name, status, output_json});
  storage::execution_step_record step;
  step.run_id = st.spec.run_row;
  step.kind = std::move(kind);
  step.name = std::move(name);
  step.status = std::move(status);
  step.input_json = std::move(input_json);
  step.output_json = std::move(output_json);
  step.created_at = unix_millis_now();
  write(self, storage::append_step_op(std::move(step)));
}

void persist_message(run_actor* self, const chat_message& m, const token_usage* usage = nullptr) {
  auto& st = self->state;
  if (st.spec.conversation_row == 0) {
    return;
  }
  storage::message_record r;
  r.conversation_id = st.spec.conversation_row;
  r.run_id = st.spec.run_row;
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
  write(self, storage::append_message_op(std::move(r)));
}

// -- the run's flow ------------------------------------------------------------------

void cancel_inflight(run_actor* self) {
  for (auto& [id, task] : self->state.inflight) {
    task.cancel();
  }
  self->state.inflight.clear();
  for (auto& child : self->state.children) {
    self->send(child, cancel_atom::value);
  }
  self->state.children.clear();
}

void finish_run(run_actor* self, storage::run_status status, std::string text, std::string error) {
  auto& st = self->state;
  if (st.finished) {
    return;
  }
  st.finished = true;
  cancel_inflight(self);
  st.result.run_id = st.spec.run_id;
  st.result.status = status;
  st.result.text = std::move(text);
  st.result.error = std::move(error);
  st.result.rounds = st.round;
  st.result.llm_calls = st.llm_calls;
  st.result.model = st.model;
  st.result.artifacts = st.ledger.artifacts();
  json_writer w;
  w.begin_object();
  switch (status) {
    case storage::run_status::succeeded:
      w.key("text").value(st.result.text).key("rounds").value(st.round);
      w.key("prompt_tokens").value(st.result.usage.prompt_tokens);
      w.key("completion_tokens").value(st.result.usage.completion_tokens);
      w.key("artifacts").begin_array();
      for (const auto& a : st.result.artifacts) {
        w.value(a.path.empty() ? a.name : a.path);
      }
      w.end_array().end_object();
      publish(self, run_event_type::run_completed, std::move(w).str());
      break;
    case storage::run_status::cancelled:
      w.key("reason").value(st.result.error).end_object();
      publish(self, run_event_type::run_cancelled, std::move(w).str());
      break;
    default:
      w.key("error").value(st.result.error).end_object();
      publish(self, run_event_type::run_failed, std::move(w).str());
      break;
  }
  if (status == storage::run_status::succeeded) {
    chat_message final_message{chat_role::assistant, st.result.text, {}, {}, {}};
    persist_message(self, final_message, &st.result.usage);
  }
  auto deliver = [self] {
    if (self->state.promise.pending()) {
      self->state.promise.deliver(self->state.result);
    }
    self->quit();
  };
  if (st.spec.io.writer && st.spec.run_row != 0) {
    // The writer applies one sender's writes in order: when the status is durable, so is
    // everything the run wrote before it.
    self->request(*st.spec.io.writer, write_timeout, write_atom::value,
                  storage::set_run_status_op(st.spec.run_row, status, st.result.error))
        .then([deliver](write_result&) { deliver(); }, [deliver](caf::error&) { deliver(); });
  } else {
    deliver();
  }
}

void fail_run(run_actor* self, std::string message) {
  finish_run(self, storage::run_status::failed, {}, std::move(message));
}

std::uint64_t track(run_actor* self, io_task task) {
  auto id = ++self->state.next_task;
  self->state.inflight.emplace(id, std::move(task));
  return id;
}

void next_round(run_actor* self);
void start_calls(run_actor* self);

std::string harness_json(const harness::decision& d, const harness::evidence_ledger& ledger) {
  json_writer w;
  w.begin_object().key("decision").raw(d.to_json()).key("evidence").raw(ledger.summary_json());
  w.end_object();
  return std::move(w).str();
}

void harness_step(run_actor* self, const std::string& name, std::string data_json, bool allowed) {
  record_step(self, "harness", name, allowed ? "done" : "rejected", "{}", data_json);
  publish(self, run_event_type::harness, std::move(data_json), name);
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

/// Tells subscribers to discard the candidate text streamed since the last correction.
void retract_candidate(run_actor* self, const std::vector<std::string>& codes) {
  auto& st = self->state;
  if (st.candidate_streamed) {
    publish(self, run_event_type::model_correction, codes_json(codes, st.round));
    st.candidate_streamed = false;
  }
}

gate_result correct(run_actor* self, const harness::decision& rejected,
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

gate_result final_gate(run_actor* self, const std::string& answer) {
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

void push_message(run_actor* self, chat_message m) {
  persist_message(self, m);
  self->state.messages.push_back(std::move(m));
}

void complete_run(run_actor* self, std::string text) {
  finish_run(self, storage::run_status::succeeded, std::move(text), {});
}

// -- tool rounds -------------------------------------------------------------------

const tools::argument_schema* schema_for(run_actor* self, const tools::tool_descriptor& d) {
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

void settle(call_slot& slot, tools::tool_result result, harness::tool_status status) {
  slot.result = std::move(result);
  slot.status = status;
  slot.done = true;
}

void publish_action_finished(run_actor* self, const call_slot& slot) {
  json_writer w;
  w.begin_object().key("call_id").value(slot.call.id).key("tool").value(slot.call.name);
  w.key("status").value(harness::to_string(slot.status));
  w.key("duration_ms").value(slot.duration.count());
  w.key("output").value(harness::summarize(slot.result.content, 300)).end_object();
  publish(self, run_event_type::action_finished, std::move(w).str());
}

/// The blocked tools for a child run of `mode` (explore, shell; anything else: general).
std::vector<std::string> child_blocked_tools(const tools::tool_registry& registry,
                                             std::string_view mode) {
  std::vector<std::string> allowed;
  if (mode == "explore") {
    allowed = {"read", "grep", "find", "ls"};
  } else if (mode == "shell") {
    allowed = {"exec", "read", "ls"};
  }
  std::vector<std::string> blocked;
  if (!allowed.empty()) {
    for (const auto& d : registry.catalog().all()) {
      if (std::find(allowed.begin(), allowed.end(), d.name) == allowed.end()) {
        blocked.push_back(d.name);
      }
    }
    blocked.push_back("plan");
  }
  // Sub-agents never start sub-agents of their own; the depth check in the pre-tool gate
  // (max_run_depth) backs this up for runs spawned with sub_agent allowed.
  blocked.push_back("sub_agent");
  return blocked;
}

void finish_sub_agent_call(run_actor* self, std::size_t index);

/// Starts one child run per task of a sub_agent call.
void start_sub_agents(run_actor* self, std::size_t index) {
  auto& st = self->state;
  auto& slot = st.calls[index];
  simdjson::dom::parser parser;
  simdjson::padded_string buffer(slot.call.arguments);
  simdjson::dom::element root;
  simdjson::dom::array tasks;
  if (parser.parse(buffer).get(root) != simdjson::SUCCESS ||
      root["tasks"].get_array().get(tasks) != simdjson::SUCCESS || tasks.size() == 0) {
    settle(slot, tools::tool_failure("invalid_arguments", "tasks must be a non-empty array"),
           harness::tool_status::error);
    return;
  }
  slot.children_pending = tasks.size();
  slot.child_answers.assign(tasks.size(), {});
  slot.child_ok.assign(tasks.size(), false);
  std::size_t n = 0;
  for (auto task : tasks) {
    const std::size_t task_index = n++;
    std::string_view objective;
    std::string_view mode;
    std::string_view model;
    if (task["objective"].get_string().get(objective) != simdjson::SUCCESS) {
      objective = {};
    }
    if (task["mode"].get_string().get(mode) != simdjson::SUCCESS) {
      mode = {};
    }
    if (task["model"].get_string().get(model) != simdjson::SUCCESS) {
      model = {};
    }
    run_spec child;
    child.run_id = fmt::format("{}.{}.{}", st.spec.run_id, slot.call.id, task_index + 1);
    child.turn_id = st.spec.turn_id;
    child.agent = st.spec.agent;
    child.agent.system_prompt =
        "You are a sub-agent. Do the task you are given and answer with its result.";
    child.provider = st.spec.provider;
    child.objective = std::string(objective);
    child.depth = st.spec.depth + 1;
    child.blocked_tools = child_blocked_tools(*st.spec.io.tools, mode);
    child.use_fast_model = model == "fast";
    child.persist_user_message = false;
    child.workspace = st.spec.workspace;
    child.tool_timeout = st.spec.tool_timeout;
    child.io = st.spec.io;
    // A child's steps stay in its own result: it has no run row of its own.
    child.io.writer.reset();
    auto handle = spawn_run(self->system(), std::move(child), caf::actor{});
    st.children.push_back(handle);
    const auto limit = std::chrono::duration_cast<caf::timespan>(st.spec.agent.timeout) +
                       std::chrono::duration_cast<caf::timespan>(child_grace);
    self->request(handle, limit, run_atom::value)
        .then(
            [self, index, task_index](run_result& r) {
              auto& s = self->state;
              if (s.finished || index >= s.calls.size()) {
                return;
              }
              auto& sl = s.calls[index];
              const bool ok = r.status == storage::run_status::succeeded;
              sl.child_ok[task_index] = ok;
              sl.child_answers[task_index] = ok ? r.text : r.error;
              for (auto& a : r.artifacts) {
                a.call_id = sl.call.id;
                sl.result.artifacts.push_back(tools::tool_artifact{a.path, a.mime, a.size});
              }
              finish_sub_agent_call(self, index);
            },
            [self, index, task_index](caf::error& e) {
              // A crashed or timed-out child is blocker evidence, never a hung parent.
              auto& s = self->state;
              if (s.finished || index >= s.calls.size()) {
                return;
              }
              auto& sl = s.calls[index];
              sl.child_ok[task_index] = false;
              sl.child_answers[task_index] =
                  fmt::format("the sub-agent did not finish: {}", from_caf_error(e).message);
              finish_sub_agent_call(self, index);
            });
  }
}

void on_call_done(run_actor* self, std::size_t index);

void finish_sub_agent_call(run_actor* self, std::size_t index) {
  auto& slot = self->state.calls[index];
  if (--slot.children_pending > 0) {
    return;
  }
  json_writer w;
  bool any_ok = false;
  w.begin_object().key("results").begin_array();
  for (std::size_t i = 0; i < slot.child_answers.size(); ++i) {
    any_ok = any_ok || slot.child_ok[i];
    w.begin_object().key("task").value(i + 1).key("ok").value(static_cast<bool>(slot.child_ok[i]));
    w.key(slot.child_ok[i] ? "answer" : "error").value(slot.child_answers[i]).end_object();
  }
  w.end_array().end_object();
  slot.result.ok = any_ok;
  slot.result.content = std::move(w).str();
  if (!any_ok) {
    slot.result.failure_kind = "tool_error";
  }
  slot.status = any_ok ? harness::tool_status::success : harness::tool_status::error;
  slot.done = true;
  on_call_done(self, index);
}

/// Decides, inside the actor, what happens to each call before anything runs.
void gate_calls(run_actor* self) {
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
    } else if (st.spec.io.tools) {
      slot.impl = st.spec.io.tools->find(name);
      descriptor = slot.impl ? &slot.impl->descriptor() : nullptr;
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
    if (name == "sub_agent" && st.spec.depth >= max_run_depth) {
      pre_tool.allowed = false;
      pre_tool.violations.push_back(
          {harness::violation_code::tool_blocked_by_contract, harness::severity::critical,
           fmt::format("sub-agents may not nest deeper than {}", max_run_depth),
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

void start_call(run_actor* self, std::size_t index) {
  auto& st = self->state;
  auto& slot = st.calls[index];
  slot.started = std::chrono::steady_clock::now();
  ++st.running_calls;
  if (slot.call.name == "sub_agent") {
    start_sub_agents(self, index);
    if (slot.done) {
      on_call_done(self, index);
    }
    return;
  }
  tools::tool_context context;
  context.workspace = st.spec.workspace;
  context.run_id = st.spec.run_id;
  context.call_id = slot.call.id;
  // One tool_call actor per call: it owns the call's coroutine and timeout, and dies with
  // the run (cancel_inflight also tells it to stop, which kills its processes).
  tool_call_spec call;
  call.impl = slot.impl;
  call.sandbox = st.spec.io.sandbox;
  call.arguments = slot.call.arguments;
  call.context = std::move(context);
  call.executor = st.spec.io.http->get_executor();
  call.timeout = st.spec.tool_timeout;
  auto actor = spawn_tool_call(self->system(), std::move(call), caf::actor_cast<caf::actor>(self));
  st.children.push_back(actor);
  const int round = st.round;
  auto settled = [self, index, round, actor](expected<tools::tool_result> r) {
    auto& s = self->state;
    std::erase(s.children, actor);
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

void end_tool_round(run_actor* self);

/// Starts the next batch: a run of consecutive concurrency-safe calls in parallel, or
/// one other call alone.
void start_calls(run_actor* self) {
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

void on_call_done(run_actor* self, std::size_t index) {
  auto& st = self->state;
  auto& slot = st.calls[index];
  slot.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - slot.started);
  publish_action_finished(self, slot);
  --st.running_calls;
  if (st.running_calls == 0) {
    start_calls(self);
  }
}

void end_tool_round(run_actor* self) {
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
        .value(slot.call.arguments);
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
    st.messages.push_back(chat_message{chat_role::user, std::move(warnings), {}, {}, {}});
  }
  st.calls.clear();
  next_round(self);
}

void run_tool_round(run_actor* self, std::vector<tool_call> calls) {
  auto& st = self->state;
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

// -- LLM rounds --------------------------------------------------------------------

void on_llm_outcome(run_actor* self, completion_outcome out) {
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
      record_step(self, "llm", "llm_round", "failed", "{}",
                  fmt::format(R"({{"model":"{}","failure":"{}"}})", st.model,
                              to_string(out.failure->kind)));
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
    w.key("tool_calls").raw(tool_calls_json(out.answer.tool_calls)).end_object();
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
        st.messages.push_back(chat_message{chat_role::assistant, out.answer.text, {}, {}, {}});
        st.messages.push_back(chat_message{chat_role::user, std::move(gate.text), {}, {}, {}});
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
  st.messages.push_back(chat_message{chat_role::user, std::move(d.prompt), {}, {}, {}});
  next_round(self);
}

void next_round(run_actor* self) {
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
    push_message(self, chat_message{chat_role::user, std::move(text), {}, {}, {}});
  }
  st.steered.clear();
  completion_request request;
  request.model = st.model;
  request.stream = true;
  std::string system = st.spec.agent.system_prompt;
  if (auto rendered = st.plan.render(); !rendered.empty()) {
    system += (system.empty() ? "" : "\n\n") + rendered;
  }
  if (!system.empty()) {
    request.messages.push_back(chat_message{chat_role::system, std::move(system), {}, {}, {}});
  }
  request.messages.insert(request.messages.end(), st.messages.begin(), st.messages.end());
  request.tools = st.tool_defs;
  auto id = std::make_shared<std::uint64_t>(0);
  auto task =
      start_io(self, st.spec.io.http->get_executor(),
               llm_call(st.client, std::move(request), caf::actor_cast<caf::actor>(self), st.round),
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

/// The tools the model is offered: the agent's list (everything when empty) minus the
/// blocked ones.
std::vector<tool_definition> offered_tools(const run_spec& spec) {
  std::vector<tools::tool_descriptor> candidates;
  if (spec.io.tools) {
    candidates = spec.io.tools->catalog().all();
  }
  candidates.push_back(tools::finish_tool_descriptor());
  candidates.push_back(tools::plan_tool_descriptor());
  candidates.push_back(tools::sub_agent_tool_descriptor());
  std::vector<tool_definition> out;
  for (auto& d : candidates) {
    const auto& listed = spec.agent.tools;
    const bool wanted = listed.empty()
                            ? d.name != "sub_agent"
                            : std::find(listed.begin(), listed.end(), d.name) != listed.end();
    const bool blocked = std::find(spec.blocked_tools.begin(), spec.blocked_tools.end(), d.name) !=
                         spec.blocked_tools.end();
    if (wanted && !blocked) {
      out.push_back(tool_definition{d.name, d.description, d.input_schema});
    }
  }
  return out;
}

void start_run(run_actor* self) {
  auto& st = self->state;
  st.started = true;
  st.model = st.spec.use_fast_model && !st.spec.agent.fast_model.empty() ? st.spec.agent.fast_model
                                                                         : st.spec.agent.model;
  st.tool_defs = offered_tools(st.spec);
  harness::contract_input input;
  input.objective = st.spec.objective;
  input.agent_tools = st.spec.agent.tools;
  input.blocked_tools = st.spec.blocked_tools;
  input.sub_agent = st.spec.depth > 0;
  st.contract = harness::build_contract(input);
  st.budget = harness::correction_budget(st.contract.max_correction_attempts);
  st.client = std::make_shared<net::provider_client>(*st.spec.io.http, st.spec.provider);
  st.messages = st.spec.history;
  if (st.spec.io.writer && st.spec.run_row != 0) {
    write(self, storage::set_run_status_op(st.spec.run_row, storage::run_status::running));
  }
  chat_message user{chat_role::user, st.spec.objective, {}, {}, {}};
  if (st.spec.persist_user_message) {
    persist_message(self, user);
  }
  st.messages.push_back(std::move(user));
  {
    json_writer w;
    w.begin_object().key("agent").value(st.spec.agent.name).key("model").value(st.model);
    w.key("depth").value(st.spec.depth).key("objective").value(st.spec.objective);
    w.key("complexity").value(harness::to_string(st.contract.complexity));
    w.key("output_mode").value(harness::to_string(st.contract.mode)).end_object();
    publish(self, run_event_type::run_started, std::move(w).str());
  }
  if (st.contract.require_plan) {
    st.plan = harness::plan_state::bootstrap(st.contract);
    if (!st.plan.empty()) {
      harness_step(self, "bootstrap_plan", plan_json(st.plan), true);
    }
  }
  self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(st.spec.agent.timeout),
                     deadline_atom::value);
  next_round(self);
}

caf::behavior run_behavior(run_actor* self, run_spec spec, caf::actor subscriber) {
  self->state.spec = std::move(spec);
  self->state.subscriber = std::move(subscriber);
  return {
      handle_io_completion(),
      [self](run_atom) -> caf::result<run_result> {
        auto& st = self->state;
        if (st.started || st.finished) {
          return caf::make_error(caf::sec::runtime_error, "the run was already started");
        }
        st.promise = self->make_response_promise();
        if (!st.spec.io.http) {
          fail_run(self, "the run has no http client");
        } else {
          start_run(self);
        }
        return caf::delegated<run_result>{};
      },
      [self](cancel_atom) {
        finish_run(self, storage::run_status::cancelled, {}, "the run was cancelled");
      },
      [self](steer_atom, std::string& text) {
        if (!self->state.finished) {
          self->state.steered.push_back(std::move(text));
        }
      },
      [self](deadline_atom) {
        finish_run(self, storage::run_status::cancelled, {},
                   "the run reached its deadline and was cancelled");
      },
      [self](delta_atom, int round, std::string& text) {
        auto& st = self->state;
        if (st.finished || round != st.round) {
          return;
        }
        st.candidate_streamed = true;
        json_writer w;
        w.begin_object().key("text").value(text).key("round").value(round);
        w.key("candidate").value(true).end_object();
        publish(self, run_event_type::model_delta, std::move(w).str());
      },
  };
}

} // namespace

caf::actor spawn_run(caf::actor_system& system, run_spec spec, caf::actor subscriber) {
  return system.spawn(run_behavior, std::move(spec), std::move(subscriber));
}

} // namespace troupe::actors
