#include "troupe/tools/tool_resolver.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace troupe::tools {

namespace {

// Without a list, an agent gets every tool except sub_agent: delegation is opt-in.
constexpr std::string_view opt_in_tool = "sub_agent";

} // namespace

const resolved_tool* tool_snapshot::find(std::string_view name) const noexcept {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &all_[it->second];
}

bool tool_snapshot::is_selected(std::string_view name) const noexcept {
  return std::any_of(selected_.begin(), selected_.end(),
                     [&](const resolved_tool& t) { return t.descriptor().name == name; });
}

expected<void> tool_resolver::add_source(std::shared_ptr<const tool_source> source) {
  if (!source) {
    return fail(errc::invalid_argument, "a tool source is null");
  }
  std::lock_guard lock(mutex_);
  for (const auto& s : sources_) {
    if (s->name() == source->name()) {
      return fail(errc::conflict,
                  fmt::format("a tool source named '{}' exists already", source->name()));
    }
  }
  sources_.push_back(std::move(source));
  return {};
}

bool tool_resolver::remove_source(std::string_view name) {
  std::lock_guard lock(mutex_);
  return std::erase_if(sources_, [&](const auto& s) { return s->name() == name; }) > 0;
}

std::vector<std::string> tool_resolver::source_names() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& s : sources_) {
    out.push_back(s->name());
  }
  return out;
}

expected<std::shared_ptr<const tool_snapshot>>
tool_resolver::resolve(std::string_view agent, std::span<const std::string> agent_tools) const {
  return resolve_for(agent, agent_tools, nullptr);
}

expected<std::shared_ptr<const tool_snapshot>>
tool_resolver::resolve(const agent_settings& agent) const {
  return resolve_for(agent.name, agent.tools, &agent);
}

expected<std::shared_ptr<const tool_snapshot>>
tool_resolver::resolve_for(std::string_view agent, std::span<const std::string> agent_tools,
                           const agent_settings* settings) const {
  std::vector<std::shared_ptr<const tool_source>> sources;
  {
    std::lock_guard lock(mutex_);
    sources = sources_;
  }
  const auto wanted = [&](std::string_view name) {
    return agent_tools.empty()
               ? name != opt_in_tool
               : std::find(agent_tools.begin(), agent_tools.end(), name) != agent_tools.end();
  };
  auto snapshot = std::make_shared<tool_snapshot>();
  snapshot->agent_ = std::string(agent);
  // Per tool of `all_`: its source grants it to the agent whatever the agent's list says.
  std::vector<bool> granted;
  for (const auto& source : sources) {
    // Each source's set is taken once: it stays consistent whatever the source does next.
    const auto set = source->current();
    snapshot->versions_.push_back({source->name(), set->version});
    const auto grant = source->grant_for(agent);
    if (grant == tool_grant::denied) {
      continue;
    }
    for (const auto& t : set->tools) {
      const auto& name = t->descriptor().name;
      if (settings != nullptr && !t->offered_to(*settings)) {
        if (std::find(agent_tools.begin(), agent_tools.end(), name) != agent_tools.end()) {
          return fail(errc::permission_denied,
                      fmt::format("agent '{}': the tool '{}' (source '{}') is not offered to it "
                                  "(its `agents` list, or the agent's web_search mode)",
                                  agent, name, source->name()));
        }
        continue;
      }
      if (const auto* earlier = snapshot->find(name)) {
        if (wanted(name) || grant == tool_grant::granted) {
          return fail(errc::conflict,
                      fmt::format("agent '{}': the tool '{}' is offered by two sources, '{}' and "
                                  "'{}'",
                                  agent, name, earlier->source, source->name()));
        }
        continue;
      }
      snapshot->index_.emplace(name, snapshot->all_.size());
      snapshot->all_.push_back({t, source->name()});
      granted.push_back(grant == tool_grant::granted);
    }
  }
  for (const auto& name : agent_tools) {
    if (!snapshot->find(name)) {
      return fail(errc::not_found, fmt::format("agent '{}': unknown tool '{}'", agent, name));
    }
  }
  for (std::size_t k = 0; k < snapshot->all_.size(); ++k) {
    const auto& t = snapshot->all_[k];
    if (granted[k] || wanted(t.descriptor().name)) {
      snapshot->selected_.push_back(t);
    }
  }
  return std::shared_ptr<const tool_snapshot>(std::move(snapshot));
}

std::shared_ptr<tool_resolver> make_builtin_tool_resolver(code_interpreter_options options,
                                                          std::shared_ptr<blocking_pool> pool) {
  auto resolver = std::make_shared<tool_resolver>();
  (void)resolver->add_source(make_builtin_tool_source(std::move(options), std::move(pool)));
  return resolver;
}

} // namespace troupe::tools
