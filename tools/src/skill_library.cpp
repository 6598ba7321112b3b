// The node's skills as a tool source (skill_library.hpp): the `skill` tool that lists and
// reads skills, and one sandboxed script tool per runnable skill.

#include "troupe/tools/skill_library.hpp"

#include "script_outcome.hpp"

#include <algorithm>

#include <boost/asio/awaitable.hpp>
#include <fmt/format.h>
#include <simdjson.h>

#include "troupe/runtime/json_object.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/tools/sandbox.hpp"
#include "troupe/tools/workspace.hpp"

namespace troupe::tools {

namespace asio = boost::asio;

namespace {

constexpr std::size_t skill_output_cap = 64 * 1024;
constexpr std::size_t skill_memory_mb = 512;
// V8 reserves about 1 GiB of address space at start-up whatever the program uses.
constexpr std::size_t node_address_space_extra_mb = 1024;

bool enabled(const std::vector<std::string>& skills, std::string_view name) {
  return std::any_of(skills.begin(), skills.end(),
                     [&](const std::string& s) { return s == "*" || s == name; });
}

void skill_summary(json_writer& w, const skill& s) {
  w.begin_object().key("name").value(s.name).key("description").value(s.description);
  w.key("triggers").begin_array();
  for (const auto& t : s.triggers) {
    w.value(t);
  }
  w.end_array();
  w.key("tool").value(s.is_tool() && s.runnable);
  if (!s.unavailable_reason.empty()) {
    w.key("unavailable").value(s.unavailable_reason);
  }
  w.end_object();
}

/// `skill`: lists the agent's skills and reads one's body.
class skill_reader final : public tool {
public:
  explicit skill_reader(std::shared_ptr<const skill_snapshot> skills) : skills_(std::move(skills)) {
    descriptor_.name = std::string(skill_tool_name);
    descriptor_.description =
        "Skills are instructions for tasks (listed in the system prompt as <skills>). "
        "action \"read\" with a skill's name returns its full instructions: read a skill "
        "before you follow it. action \"list\" lists your skills.";
    descriptor_.input_schema =
        R"j({"type":"object","properties":{"action":{"type":"string","enum":["read","list"]},)j"
        R"j("name":{"type":"string","description":"the skill's name (for read)"}},)j"
        R"j("required":["action"],"additionalProperties":false})j";
    descriptor_.concurrency_safe = true;
  }

  const tool_descriptor& descriptor() const noexcept override {
    return descriptor_;
  }
  bool offered_to(const agent_settings& agent) const noexcept override {
    return !agent.skills.empty();
  }
  asio::awaitable<tool_result> invoke(std::string arguments, tool_context ctx) const override {
    co_return answer(arguments, ctx.skills);
  }

  const skill_snapshot& skills() const noexcept {
    return *skills_;
  }

private:
  tool_result answer(std::string_view arguments, const std::vector<std::string>& agent) const {
    auto args = json_object::parse(arguments);
    if (!args) {
      return tool_failure("invalid_arguments", "the arguments must be a JSON object");
    }
    const auto action = args->text("action").value_or(std::nullopt).value_or(std::string());
    if (action == "list") {
      json_writer w;
      w.begin_object().key("skills").begin_array();
      for (const auto& s : skills_->set.skills) {
        if (enabled(agent, s.name)) {
          skill_summary(w, s);
        }
      }
      w.end_array().end_object();
      return {true, std::move(w).str(), {}, {}};
    }
    if (action != "read") {
      return tool_failure("invalid_arguments", "action must be \"read\" or \"list\"");
    }
    const auto name = args->text("name").value_or(std::nullopt).value_or(std::string());
    const auto* s = skills_->set.find(name);
    if (name.empty() || s == nullptr || !enabled(agent, name)) {
      std::string known;
      for (const auto& k : skills_->set.skills) {
        if (enabled(agent, k.name)) {
          known += (known.empty() ? "" : ", ") + k.name;
        }
      }
      return tool_failure("not_found", fmt::format("no skill '{}'; your skills are: {}", name,
                                                   known.empty() ? std::string("none") : known));
    }
    json_writer w;
    w.begin_object().key("name").value(s->name).key("instructions").value(s->body);
    if (s->is_tool()) {
      w.key("tool").value(s->runnable ? s->name : std::string());
      if (!s->runnable) {
        w.key("unavailable").value(s->unavailable_reason);
      }
    }
    w.end_object();
    return {true, std::move(w).str(), {}, {}};
  }

  std::shared_ptr<const skill_snapshot> skills_;
  tool_descriptor descriptor_;
};

/// A runnable skill with an input schema: its script in the sandbox.
class skill_script final : public tool {
public:
  skill_script(skill s, std::vector<std::string> runner, std::chrono::milliseconds timeout)
      : skill_(std::move(s)), runner_(std::move(runner)), timeout_(timeout) {
    descriptor_.name = skill_.name;
    descriptor_.description = skill_.description;
    descriptor_.input_schema = skill_.input_schema;
    descriptor_.concurrency_safe = false;
  }

  const tool_descriptor& descriptor() const noexcept override {
    return descriptor_;
  }
  bool offered_to(const agent_settings& agent) const noexcept override {
    return agent.skill_enabled(skill_.name);
  }
  asio::awaitable<tool_result> invoke(std::string arguments, tool_context ctx) const override {
    return run(this, std::move(arguments), std::move(ctx));
  }

  std::optional<approval_mode> approval() const noexcept override {
    if (skill_.approval.empty()) {
      return std::nullopt;
    }
    auto mode = parse_approval_mode(skill_.approval);
    return mode ? std::optional<approval_mode>(*mode) : std::nullopt;
  }

private:
  static asio::awaitable<tool_result> run(const skill_script* self, std::string arguments,
                                          tool_context ctx);

  skill skill_;
  std::vector<std::string> runner_;
  std::chrono::milliseconds timeout_;
  tool_descriptor descriptor_;
};

asio::awaitable<tool_result> skill_script::run(const skill_script* self, std::string arguments,
                                               tool_context ctx) {
  if (ctx.sandbox == nullptr) {
    co_return tool_failure("policy_blocked",
                           "no sandbox is configured, so the skill cannot run; it was not run");
  }
  // The workspace is made on the blocking pool when this is the run's first call.
  // The job named and the awaitable awaited as a named value: GCC 12 destroys some
  // temporaries of a co_await full-expression twice (here the job's captured path was
  // freed twice, and the node aborted).
  auto pool = blocking_pool::shared_default();
  auto open_workspace = [dir = ctx.workspace](const job_control&) -> expected<void> {
    if (dir.empty()) {
      return {};
    }
    auto ws = workspace::open(dir);
    if (!ws) {
      return tl::unexpected(ws.error());
    }
    return {};
  };
  auto opening = pool->run(std::move(open_workspace), std::chrono::seconds(10));
  auto made = co_await std::move(opening);
  if (!made || !*made) {
    co_return tool_failure("tool_error", !made ? made.error().message : made->error().message);
  }
  const bool host = ctx.sandbox->options().allow_host;
  sandbox_request request;
  request.argv = self->runner_;
  if (host) {
    request.argv.push_back((self->skill_.dir / self->skill_.run_script).string());
  } else {
    request.read_only_dir = self->skill_.dir;
    request.argv.push_back("/skill/" + self->skill_.run_script);
    request.env["SKILL_DIR"] = "/skill";
  }
  request.workspace = ctx.workspace;
  request.stdin_data =
      arguments.find_first_not_of(" \t\r\n") == std::string::npos ? "{}" : arguments;
  request.limits.timeout = self->timeout_;
  request.limits.memory_mb = skill_memory_mb;
  if (std::filesystem::path(self->runner_.front()).filename() == "node") {
    request.limits.address_space_mb = skill_memory_mb + node_address_space_extra_mb;
  }
  request.limits.output_cap_bytes = skill_output_cap;
  auto r = co_await ctx.sandbox->run(std::move(request));
  const bool ok = r.exit_code == 0 && !r.timed_out && !r.cancelled;
  json_writer w;
  w.begin_object().key("ok").value(ok).key("skill").value(self->skill_.name);
  detail::write_script_outcome(w, r, ok, "killed at the skill's timeout");
  w.end_object();
  tool_result result{ok, std::move(w).str(), {}, {}};
  if (!ok) {
    result.failure_kind = r.timed_out ? "timeout" : "tool_error";
  }
  co_return result;
}

} // namespace

skill_library::skill_library(skill_library_options options)
    : options_(std::move(options)),
      source_(std::make_shared<dynamic_tool_source>(std::string(skills_source_name))),
      current_(std::make_shared<const skill_snapshot>()) {}

std::shared_ptr<const tool_source> skill_library::source() const {
  return source_;
}

std::shared_ptr<const skill_snapshot> skill_library::current() const {
  std::lock_guard lock(mutex_);
  return current_;
}

std::shared_ptr<const skill_snapshot> skill_library::reload() {
  auto set = load_skills(options_.dirs, options_.runners, options_.path);
  // A skill whose name a node tool has is no tool of its own.
  for (auto& s : set.skills) {
    const bool reserved = s.name == skill_tool_name ||
                          std::find(options_.reserved.begin(), options_.reserved.end(), s.name) !=
                              options_.reserved.end();
    if (reserved && s.is_tool() && s.runnable) {
      s.runnable = false;
      s.unavailable_reason = fmt::format("its name '{}' is a tool troupe has already", s.name);
    }
  }
  std::lock_guard lock(mutex_);
  auto next = std::make_shared<skill_snapshot>();
  next->set = std::move(set);
  next->generation = current_->generation + 1;
  std::shared_ptr<const skill_snapshot> published = next;
  std::vector<std::shared_ptr<const tool>> tools;
  tools.push_back(std::make_shared<const skill_reader>(published));
  for (const auto& s : published->set.skills) {
    if (s.is_tool() && s.runnable) {
      if (const auto* runner = options_.runners.find(s.run_script)) {
        tools.push_back(std::make_shared<const skill_script>(s, *runner, options_.timeout));
      }
    }
  }
  (void)source_->replace(std::move(tools));
  current_ = published;
  return published;
}

std::vector<std::string> skill_index_lines(const tool& skill_tool, const agent_settings& agent) {
  std::vector<std::string> out;
  const auto* reader = dynamic_cast<const skill_reader*>(&skill_tool);
  if (reader == nullptr) {
    return out;
  }
  for (const auto& s : reader->skills().set.skills) {
    if (agent.skill_enabled(s.name)) {
      out.push_back(skill_prompt_line(s));
    }
  }
  return out;
}

} // namespace troupe::tools
