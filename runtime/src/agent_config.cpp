#include "troupe/runtime/agent_config.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace troupe {

namespace {

constexpr std::string_view provider_types[] = {
    "openai", "openai-compatible", "openrouter", "qwen", "kimi", "claude"};

} // namespace

key_env_policy::key_env_policy(std::vector<std::string> allowed_env)
    : allowed_(std::move(allowed_env)) {}

bool key_env_policy::allows(std::string_view name) const noexcept {
  if (name.size() > prefix.size() && name.starts_with(prefix)) {
    return true;
  }
  if (name == built_in) {
    return true;
  }
  return !name.empty() && std::find(allowed_.begin(), allowed_.end(), name) != allowed_.end();
}

expected<void> key_env_policy::check(std::string_view field, std::string_view name) const {
  if (name.empty() || allows(name)) {
    return {};
  }
  return fail(errc::invalid_argument,
              fmt::format("{}: '{}' is not allowed: {}", field, name, key_env_rule()));
}

std::string_view key_env_rule() noexcept {
  return "a key variable must be named TROUPE_KEY_<something>, be OPENAI_API_KEY, or be "
         "listed in [secrets] allowed_env in the config file";
}

std::string
provider_settings::resolve_api_key(const std::map<std::string, std::string>& environment,
                                   const key_env_policy& policy) const {
  if (!api_key.empty()) {
    return api_key;
  }
  if (!api_key_env.empty() && policy.allows(api_key_env)) {
    if (const auto it = environment.find(api_key_env); it != environment.end()) {
      return it->second;
    }
  }
  return {};
}

std::string_view to_string(web_search_mode m) noexcept {
  switch (m) {
    case web_search_mode::off:
      return "off";
    case web_search_mode::builtin:
      return "builtin";
    case web_search_mode::external:
      return "external";
  }
  return "off";
}

bool agent_settings::skill_enabled(std::string_view skill) const noexcept {
  for (const auto& s : skills) {
    if (s == "*" || s == skill) {
      return true;
    }
  }
  return false;
}

expected<web_search_mode> parse_web_search_mode(std::string_view name) {
  for (auto m : {web_search_mode::off, web_search_mode::builtin, web_search_mode::external}) {
    if (to_string(m) == name) {
      return m;
    }
  }
  return fail(errc::invalid_argument,
              fmt::format("web_search: '{}' is not one of off, builtin, external", name));
}

std::string_view to_string(queue_policy p) noexcept {
  switch (p) {
    case queue_policy::followup:
      return "followup";
    case queue_policy::steer:
      return "steer";
    case queue_policy::interrupt:
      return "interrupt";
    case queue_policy::collect:
      return "collect";
  }
  return "followup";
}

expected<queue_policy> parse_queue_policy(std::string_view name) {
  for (auto p : {queue_policy::followup, queue_policy::steer, queue_policy::interrupt,
                 queue_policy::collect}) {
    if (to_string(p) == name) {
      return p;
    }
  }
  return fail(
      errc::invalid_argument,
      fmt::format("'{}' is not a queue policy (followup, steer, interrupt, collect)", name));
}

expected<void> validate_agents(const std::vector<provider_settings>& providers,
                               const std::vector<agent_settings>& agents,
                               const std::vector<std::string>& known_tools) {
  std::set<std::string> provider_names;
  for (const auto& p : providers) {
    if (p.name.empty()) {
      return fail(errc::invalid_argument, "a [[providers]] entry has no name");
    }
    if (!provider_names.insert(p.name).second) {
      return fail(errc::invalid_argument, fmt::format("provider '{}' is defined twice", p.name));
    }
    if (std::find(std::begin(provider_types), std::end(provider_types), p.type) ==
        std::end(provider_types)) {
      return fail(errc::invalid_argument,
                  fmt::format("provider '{}': unknown type '{}' (openai, openai-compatible, "
                              "openrouter, qwen, kimi, claude)",
                              p.name, p.type));
    }
    if (p.type == "openai-compatible" && p.base_url.empty()) {
      return fail(
          errc::invalid_argument,
          fmt::format("provider '{}': an openai-compatible provider needs base_url", p.name));
    }
  }
  std::set<std::string> agent_names;
  for (const auto& a : agents) {
    if (a.name.empty()) {
      return fail(errc::invalid_argument, "an [[agents]] entry has no name");
    }
    if (!agent_names.insert(a.name).second) {
      return fail(errc::invalid_argument, fmt::format("agent '{}' is defined twice", a.name));
    }
    const auto provider =
        std::find_if(providers.begin(), providers.end(),
                     [&a](const provider_settings& p) { return p.name == a.provider; });
    if (provider == providers.end()) {
      return fail(errc::invalid_argument,
                  fmt::format("agent '{}': unknown provider '{}'", a.name, a.provider));
    }
    if (a.model.empty()) {
      return fail(errc::invalid_argument, fmt::format("agent '{}': model is required", a.name));
    }
    for (const auto* model : {&a.model, &a.fast_model, &a.fallback_model}) {
      if (!model->empty() && !provider->models.empty() &&
          std::find(provider->models.begin(), provider->models.end(), *model) ==
              provider->models.end()) {
        return fail(
            errc::invalid_argument,
            fmt::format("agent '{}': provider '{}' has no model '{}'", a.name, a.provider, *model));
      }
    }
    for (const auto& tool : a.tools) {
      if (std::find(known_tools.begin(), known_tools.end(), tool) == known_tools.end()) {
        return fail(errc::invalid_argument,
                    fmt::format("agent '{}': unknown tool '{}'", a.name, tool));
      }
      // The web tools follow the agent's `web_search` mode (naming one does not turn it on).
      if ((tool == "web_search" && a.web_search != web_search_mode::external) ||
          (tool == "web_fetch" && a.web_search == web_search_mode::off)) {
        return fail(errc::invalid_argument,
                    fmt::format("agent '{}': tools names '{}' but web_search is \"{}\" ({})",
                                a.name, tool, to_string(a.web_search),
                                tool == "web_search" ? "web_search needs \"external\""
                                                     : "web_fetch needs \"builtin\" or "
                                                       "\"external\""));
      }
    }
    if (a.max_rounds == 0) {
      return fail(errc::invalid_argument,
                  fmt::format("agent '{}': max_rounds must be > 0", a.name));
    }
    if (a.web_search == web_search_mode::builtin && provider != providers.end() &&
        provider->type == "claude") {
      return fail(errc::invalid_argument,
                  fmt::format("agent '{}': web_search = \"builtin\" needs a provider on OpenAI's "
                              "wire, and '{}' is claude: use \"external\"",
                              a.name, a.provider));
    }
  }
  return {};
}

std::uint32_t effective_context_window(const agent_settings& agent,
                                       const provider_settings& provider) noexcept {
  if (agent.context_window != 0) {
    return agent.context_window;
  }
  return provider.context_window != 0 ? provider.context_window : default_context_window;
}

embedded_catalog make_embedded_catalog(const std::map<std::string, std::string>& environment,
                                       std::string_view demo_base_url) {
  const auto env = [&environment](const char* name) -> std::string {
    const auto it = environment.find(name);
    return it == environment.end() ? std::string{} : it->second;
  };
  embedded_catalog out;
  provider_settings provider;
  agent_settings agent;
  agent.name = "assistant";
  agent.tools = {
      "code_interpreter", "read", "write", "edit", "ls", "find", "grep", "plan", "finish"};
  if (!env("OPENAI_API_KEY").empty()) {
    provider.name = "openai";
    provider.base_url = env("OPENAI_BASE_URL");
    provider.type = provider.base_url.empty() ? "openai" : "openai-compatible";
    // key_env_policy allows this name without a [secrets] entry.
    provider.api_key_env = std::string(key_env_policy::built_in);
    agent.model = env("TROUPE_MODEL").empty() ? "gpt-4o-mini" : env("TROUPE_MODEL");
    agent.system_prompt = "You are a helpful assistant. Use tools when they help; answer plainly.";
  } else {
    out.demo = true;
    provider.name = "demo";
    provider.type = "openai-compatible";
    provider.base_url = std::string(demo_base_url);
    provider.models = {"troupe-demo"};
    agent.model = "troupe-demo";
    agent.system_prompt = "You are troupe's scripted demo agent.";
  }
  agent.provider = provider.name;
  out.providers.push_back(std::move(provider));
  out.agents.push_back(std::move(agent));
  return out;
}

} // namespace troupe
