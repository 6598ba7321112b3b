#include "troupe/actors/run.hpp"

#include <algorithm>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "run_state.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/runtime/prompt/compression.hpp"
#include "troupe/runtime/prompt/skills_block.hpp"
#include "troupe/runtime/prompt/token_estimate.hpp"
#include "troupe/storage/write_op.hpp"
#include "troupe/tools/control_tools.hpp"
#include "troupe/tools/skill_library.hpp"

// The run actor's behavior and its life: the start (contract, plan bootstrap, deadline,
// the first LLM round), cancellation and the end of a run. The rounds themselves are in
// run_llm_round.cpp and run_tool_round.cpp (run_state.hpp lists the files).

namespace troupe::actors {

namespace detail {

void cancel_inflight(run_self self) {
  for (auto& [id, task] : self->state.inflight) {
    task.cancel();
  }
  self->state.inflight.clear();
  for (auto& child : self->state.child_runs) {
    self->send(child, cancel_atom::value);
  }
  self->state.child_runs.clear();
  for (auto& call : self->state.tool_calls) {
    self->send(call, cancel_atom::value);
  }
  self->state.tool_calls.clear();
}

void finish_run(run_self self, storage::run_status status, std::string text, std::string error) {
  auto& st = self->state;
  if (st.finished) {
    return;
  }
  st.finished = true;
  cancel_inflight(self);
  abandon_approvals(self);
  st.result.run_id = st.spec.run_id;
  st.result.status = status;
  st.result.text = std::move(text);
  st.result.error = std::move(error);
  st.result.rounds = st.round;
  st.result.llm_calls = st.llm_calls;
  st.result.model = st.model;
  st.result.artifacts = st.ledger.artifacts();
  if (st.compressed) {
    const auto end = static_cast<std::ptrdiff_t>(std::min(st.objective_index, st.messages.size()));
    st.result.compressed_history.emplace(st.messages.begin(), st.messages.begin() + end);
    st.spans.resize(st.messages.size());
    st.result.compressed_spans.assign(st.spans.begin(), st.spans.begin() + end);
  }
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
    st.result.answer_span = persist_message(self, final_message, &st.result.usage);
  }
  if (st.spec.row_pending) {
    // Reported once the row is written (on_run_row), after the writes made before it.
    st.outcome_waits_for_row = true;
    return;
  }
  report_outcome(self);
}

void report_outcome(run_self self) {
  auto& st = self->state;
  const auto status = st.result.status;
  auto deliver = [self] {
    if (self->state.promise.pending()) {
      self->state.promise.deliver(self->state.result);
    }
    self->quit();
  };
  if (st.spec.io.writer && st.spec.run_row != 0) {
    // The writer applies one sender's writes in order: when the status is durable, so is
    // everything the run wrote before it.
    // An outcome that is not durable is not reported as a success.
    auto not_stored = [self](const std::string& why) {
      auto& r = self->state.result;
      r.status = storage::run_status::failed;
      r.error = fmt::format("the run's outcome could not be stored: {}", why);
    };
    // Writes apply in order: a failed step or message write has been answered by now.
    auto check_earlier = [self] {
      auto& state = self->state;
      if (state.persistence_error && state.result.status == storage::run_status::succeeded) {
        state.result.status = storage::run_status::failed;
        state.result.error = *state.persistence_error;
        // The row said succeeded a moment ago; it says what the result says.
        caf::anon_send(*state.spec.io.writer, write_atom::value,
                       storage::set_run_status_op(state.spec.run_row, state.result.status,
                                                  state.result.error));
      }
    };
    self->request(*st.spec.io.writer, store_write_timeout, write_atom::value,
                  storage::set_run_status_op(st.spec.run_row, status, st.result.error))
        .then(
            [deliver, not_stored, check_earlier](write_result& r) {
              if (!r) {
                not_stored(r.error().message);
              }
              check_earlier();
              deliver();
            },
            [deliver, not_stored](caf::error& e) {
              not_stored(from_caf_error(e).message);
              deliver();
            });
  } else {
    deliver();
  }
}

void fail_run(run_self self, std::string message) {
  finish_run(self, storage::run_status::failed, {}, std::move(message));
}

std::uint64_t track(run_self self, io_task task) {
  auto id = ++self->state.next_task;
  self->state.inflight.emplace(id, std::move(task));
  return id;
}

void complete_run(run_self self, std::string text) {
  finish_run(self, storage::run_status::succeeded, std::move(text), {});
}

namespace {

/// The run's tool snapshot: its parent's (a sub-agent), else resolved for its agent from
/// the resolver, else from the registry of `io.tools` with the control tools.
expected<std::shared_ptr<const tools::tool_snapshot>> resolve_tools(const run_spec& spec) {
  if (spec.tool_snapshot) {
    return spec.tool_snapshot;
  }
  if (spec.io.resolver) {
    return spec.io.resolver->resolve(spec.agent);
  }
  tools::tool_resolver own;
  const tools::tool_registry none;
  (void)own.add_source(tools::make_registry_tool_source(
      std::string(tools::builtin_source_name), spec.io.tools ? *spec.io.tools : none, true));
  return own.resolve(spec.agent);
}

/// The tools the model is offered: the agent's (its list, everything but sub_agent when
/// empty) minus the blocked ones.
std::vector<tool_definition> offered_tools(const tools::tool_snapshot& snapshot,
                                           const std::vector<std::string>& blocked_tools) {
  std::vector<tool_definition> out;
  for (const auto& t : snapshot.selected()) {
    const auto& d = t.descriptor();
    if (std::find(blocked_tools.begin(), blocked_tools.end(), d.name) == blocked_tools.end()) {
      out.push_back(tool_definition{d.name, d.description, d.input_schema});
    }
  }
  return out;
}

void start_run(run_self self) {
  auto& st = self->state;
  st.started = true;
  st.started_at = std::chrono::steady_clock::now();
  st.model = st.spec.use_fast_model && !st.spec.agent.fast_model.empty() ? st.spec.agent.fast_model
                                                                         : st.spec.agent.model;
  harness::contract_input input;
  input.objective = st.spec.objective;
  input.agent_tools = st.spec.agent.tools;
  input.blocked_tools = st.spec.blocked_tools;
  input.sub_agent = st.spec.depth > 0;
  st.contract = harness::build_contract(input);
  st.budget = harness::correction_budget(st.contract.max_correction_attempts);
  st.client = std::make_shared<net::provider_client>(*st.spec.io.http, st.spec.provider);
  st.messages = st.spec.history;
  st.spans = st.spec.history_spans;
  st.spans.resize(st.messages.size());
  if (!st.spec.row_inserted_running) {
    write_with_row(self, [](storage::row_id run_row, storage::row_id) {
      return storage::set_run_status_op(run_row, storage::run_status::running);
    });
  }
  chat_message user{chat_role::user, st.spec.objective, {}, {}, {}};
  const auto* resume = st.spec.resume.get();
  auto objective_span = resume ? std::make_shared<storage::stored_span>(resume->objective_span)
                        : st.spec.persist_user_message ? persist_message(self, user)
                                                       : st.spec.objective_span;
  st.objective_index = st.messages.size();
  add_message(st, std::move(user), std::move(objective_span));
  if (resume) {
    // A resumed run (issue 19): its events go on after those it had published, and its
    // rounds before the restart are as stored.
    st.seq = resume->seq;
    for (std::size_t i = 0; i < resume->messages.size(); ++i) {
      add_message(st, resume->messages[i],
                  std::make_shared<storage::stored_span>(
                      i < resume->spans.size() ? resume->spans[i] : storage::stored_span{}));
    }
  }
  {
    json_writer w;
    w.begin_object().key("agent").value(st.spec.agent.name).key("model").value(st.model);
    w.key("depth").value(st.spec.depth).key("objective").value(st.spec.objective);
    w.key("complexity").value(harness::to_string(st.contract.complexity));
    w.key("output_mode").value(harness::to_string(st.contract.mode));
    if (resume) {
      w.key("resumed").value(true);
    }
    w.end_object();
    publish(self, run_event_type::run_started, std::move(w).str());
  }
  auto resolved = resolve_tools(st.spec);
  if (!resolved) {
    fail_run(self, resolved.error().message);
    return;
  }
  st.tools = std::move(*resolved);
  // The contract allows the agent's declared tools and those its sources add for it (an
  // MCP server that names the agent); blocked ones stay blocked (validate_pre_tool). An
  // empty list already allows every tool and stays empty.
  if (auto& allowed = st.contract.tools.allowed; !allowed.empty()) {
    for (const auto& t : st.tools->all()) {
      const auto& name = t.descriptor().name;
      if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
        allowed.push_back(name);
      }
    }
  }
  st.tool_defs = offered_tools(*st.tools, st.spec.blocked_tools);
  st.tool_tokens = tool_definition_tokens(st.tool_defs);
  if (st.contract.require_plan) {
    st.plan = harness::plan_state::bootstrap(st.contract);
    if (!st.plan.empty() && !resume) {
      harness_step(self, "bootstrap_plan", plan_json(st.plan), true);
    }
  }
  if (resume) {
    // The plan as the stored rounds left it (the plan tool is decided in the run, from
    // its arguments alone), and the evidence of the calls before the paused round.
    for (const auto& m : resume->messages) {
      for (const auto& call : m.tool_calls) {
        if (call.name == "plan") {
          (void)run_plan_tool(st.plan, call.arguments);
        }
      }
    }
    for (const auto& e : resume->earlier_events) {
      st.ledger.record_tool(e);
    }
  }
  self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(st.spec.agent.timeout),
                     deadline_atom::value);
  (void)st.blocks.declare(prompt::compression_note_block);
  // The agent's skills, one line each, from the skill tool of its snapshot (issue 19).
  if (const auto* skill = st.tools->find(tools::skill_tool_name)) {
    const auto lines = tools::skill_index_lines(*skill->impl, st.spec.agent);
    (void)st.blocks.declare(prompt::skills_block);
    (void)st.blocks.set(prompt::skills_block, prompt::render_skills_block(lines));
  }
  if (st.spec.compact_only) {
    // `/compact`: the history is compressed now and the answer says how; no LLM round.
    compress_context(self, true, [self](compression_done d) {
      if (self->state.finished) {
        return;
      }
      complete_run(self, d.summarised
                             ? fmt::format("Compressed {} earlier messages into a summary of {} "
                                           "tokens ({} characters); the prompt went from {} "
                                           "to {} estimated tokens.",
                                           d.messages_covered, d.summary_tokens, d.summary_chars,
                                           d.tokens_before, d.tokens_after)
                             : fmt::format("Nothing was compressed: {}.", d.skipped));
    });
    return;
  }
  // The user's memories first (when the run recalls any), then the first round.
  recall_memory(self);
}

run_actor::behavior_type run_behavior(run_self self, run_spec spec, run_event_sink subscriber) {
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
      [self](shutdown_atom) { on_shutdown(self); },
      [self](deadline_atom) { on_deadline(self); },
      [self](delta_atom, int round, std::string& text) { on_delta(self, round, std::move(text)); },
      [self](approval_atom, const std::string& id, bool approved, std::string& note,
             std::int64_t decided_by) {
        on_approval(self, id, approved, std::move(note), decided_by);
      },
      [self](approval_expire_atom, const std::string& id) { on_approval_expired(self, id); },
      [self](row_atom, storage::row_id row, storage::row_id conversation) {
        on_run_row(self, row, conversation);
      },
  };
}

} // namespace

} // namespace detail

std::size_t tool_definition_tokens(const std::vector<tool_definition>& tools) {
  std::size_t n = 0;
  for (const auto& d : tools) {
    n += prompt::estimate_tokens(d.name) + prompt::estimate_tokens(d.description) +
         prompt::estimate_tokens(d.parameters_json);
  }
  return n;
}

expected<std::vector<tool_definition>> offered_tool_definitions(const run_spec& spec) {
  auto resolved = detail::resolve_tools(spec);
  if (!resolved) {
    return tl::unexpected(resolved.error());
  }
  return detail::offered_tools(**resolved, spec.blocked_tools);
}

run_actor spawn_run(caf::actor_system& system, run_spec spec, run_event_sink subscriber) {
  return system.spawn(detail::run_behavior, std::move(spec), std::move(subscriber));
}

} // namespace troupe::actors
