// sub_agent calls: one child run per task, started under the task's mode (the tables in
// sub_agent_policy.hpp), each answer or failure collected in task order into the call's
// result. A child that crashes or overruns its deadline is a failed task, never a hung
// parent.

#include "sub_agent_policy.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "run_state.hpp"
#include "troupe/runtime/json_object.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/tools/control_tools.hpp"

namespace troupe::actors::detail {

std::vector<std::string> child_blocked_tools(const sub_agent_mode& mode,
                                             const tools::tool_snapshot& tools,
                                             const sub_agent_rules& rules) {
  std::vector<std::string> blocked;
  if (mode.restricted) {
    auto allowed = [&mode](std::string_view name) {
      return std::find(mode.allowed_tools.begin(), mode.allowed_tools.end(), name) !=
             mode.allowed_tools.end();
    };
    for (const auto& t : tools.all()) {
      const auto& name = t.descriptor().name;
      if (!tools::is_control_tool(name) && !allowed(name)) {
        blocked.push_back(name);
      }
    }
    if (!allowed("plan")) {
      blocked.push_back("plan");
    }
  }
  if (!rules.children_delegate) {
    blocked.push_back("sub_agent");
  }
  return blocked;
}

namespace {

void finish_sub_agent_call(run_self self, std::size_t index) {
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

} // namespace

void start_sub_agents(run_self self, std::size_t index) {
  auto& st = self->state;
  auto& slot = st.calls[index];
  auto args = json_object::parse(slot.call.arguments, json_object_options::tool_arguments());
  auto tasks = args ? args->objects("tasks")
                    : expected<std::vector<json_object>>(tl::unexpected(args.error()));
  // Every task's fields are read before any child starts: a wrong one fails the call whole.
  struct task_fields {
    std::string objective;
    std::string mode;
    std::string model;
  };
  std::vector<task_fields> fields;
  std::optional<error> bad;
  if (!tasks) {
    bad = tasks.error();
  } else if (tasks->empty()) {
    bad = error{errc::invalid_argument, "arguments.tasks: must be a non-empty array"};
  } else {
    for (const auto& task : *tasks) {
      auto field = [&](std::string_view key) {
        auto v = task.text(key);
        if (!v) {
          bad = bad.value_or(v.error());
          return std::string();
        }
        return v->value_or(std::string());
      };
      fields.push_back({field("objective"), field("mode"), field("model")});
    }
  }
  if (bad) {
    settle(slot, tools::tool_failure("invalid_arguments", bad->message),
           harness::tool_status::error);
    return;
  }
  slot.children_pending = fields.size();
  slot.child_answers.assign(fields.size(), {});
  slot.child_ok.assign(fields.size(), false);
  for (std::size_t task_index = 0; task_index < fields.size(); ++task_index) {
    const auto& [objective, mode, model] = fields[task_index];
    run_spec child;
    child.run_id = fmt::format("{}.{}.{}", st.spec.run_id, slot.call.id, task_index + 1);
    child.turn_id = st.spec.turn_id;
    child.agent = st.spec.agent;
    child.agent.system_prompt = std::string(sub_agent_policy.child_system_prompt);
    child.provider = st.spec.provider;
    child.objective = objective;
    child.depth = st.spec.depth + 1;
    child.blocked_tools = child_blocked_tools(find_sub_agent_mode(mode), *st.tools);
    child.use_fast_model = model == "fast";
    child.persist_user_message = false;
    child.workspace = st.spec.workspace;
    child.tool_timeout = st.spec.tool_timeout;
    child.io = st.spec.io;
    child.tool_snapshot = st.tools;
    // A child's steps stay in its own result: it has no run row of its own.
    child.io.writer.reset();
    auto handle = spawn_run(self->system(), std::move(child), run_event_sink{});
    st.child_runs.push_back(handle);
    const auto limit = std::chrono::duration_cast<caf::timespan>(st.spec.agent.timeout) +
                       std::chrono::duration_cast<caf::timespan>(sub_agent_policy.child_grace);
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

} // namespace troupe::actors::detail
