#pragma once

/// \file
/// Declarative providers and agents, as written in the config file (`[[providers]]`,
/// `[[agents]]`) and synced into the database at start. These keys are a contract:
/// deployments and tooling rely on them.
///
///     [[providers]]
///     name = "local"                      # unique
///     type = "openai-compatible"          # openai | openai-compatible | openrouter | qwen
///                                         # | kimi | claude
///     base_url = "http://127.0.0.1:9000/v1"
///     api_key_env = "TROUPE_KEY_LOCAL"    # or api_key = "…"; both optional; see key_env_policy
///     models = ["m1", "m1-mini"]
///     context_window = 128000             # optional: tokens the models take (default 128,000)
///
///     [[agents]]
///     name = "assistant"                  # unique; the `model` of the OpenAI-compatible endpoint
///     provider = "local"
///     model = "m1"
///     fast_model = "m1-mini"              # optional: sub-agents and summaries
///     fallback_model = ""                 # optional
///     system_prompt = "You are …"
///     tools = ["code_interpreter", "read", "write", "sub_agent", "plan", "finish"]
///     max_rounds = 50
///     timeout_s = 600
///     queue_policy = "followup"           # followup | steer | interrupt | collect
///     context_window = 32000              # optional: overrides the provider's
///     memory = true                       # optional: recall the user's memories into prompts
///     memory_autoapprove = false          # optional: the agent's proposals go active unreviewed
///     memory_max_items = 6                # optional: recalled items per prompt (1..12)
///     memory_max_chars = 4200             # optional: characters of the memory block
///     web_search = "off"                  # optional: off | builtin | external (tool_config.hpp)

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/runtime/approval.hpp"
#include "troupe/runtime/error.hpp"

namespace troupe {

/// How an agent searches the web (issue 18): not at all; with the provider's own search
/// option (OpenAI's `web_search_options`, Anthropic's web search server tool); or with the
/// `web_search` tool over the configured `[[search_engines]]`. `web_fetch` is offered in
/// both builtin and external mode.
enum class web_search_mode { off, builtin, external };

std::string_view to_string(web_search_mode m) noexcept;
expected<web_search_mode> parse_web_search_mode(std::string_view name);

/// The context window (in tokens) of a provider's models when the config names none.
inline constexpr std::uint32_t default_context_window = 128'000;

/// The smallest and largest `context_window` the config accepts.
inline constexpr std::uint32_t min_context_window = 1'024;
inline constexpr std::uint32_t max_context_window = 100'000'000;

/// Which environment variables may hold a provider's API key. Naming a variable (as
/// `api_key_env` in the config file or `api_key_ref` over the API) sends its value to the
/// provider's base URL, so only variables meant for keys may be named: those starting
/// with `TROUPE_KEY_`, the built-in `OPENAI_API_KEY` (the embedded catalog's), and those
/// the config file lists in `[secrets] allowed_env` — a list that only the config file
/// sets, never a flag, an environment variable or the API.
class key_env_policy {
public:
  /// Names starting with this (and longer than it) are always allowed.
  static constexpr std::string_view prefix = "TROUPE_KEY_";
  /// Allowed without being listed: the variable the embedded catalog reads.
  static constexpr std::string_view built_in = "OPENAI_API_KEY";

  /// The built-in rule only.
  key_env_policy() = default;
  /// The built-in rule and the names in `allowed_env` (`[secrets] allowed_env`).
  explicit key_env_policy(std::vector<std::string> allowed_env);

  bool allows(std::string_view name) const noexcept;
  /// Success when `name` is empty (no variable) or allowed; otherwise `invalid_argument`
  /// whose message starts with `field` and states the rule.
  expected<void> check(std::string_view field, std::string_view name) const;

  const std::vector<std::string>& allowed_env() const noexcept {
    return allowed_;
  }

private:
  std::vector<std::string> allowed_;
};

/// The rule `key_env_policy` enforces, as one sentence for errors and documentation.
std::string_view key_env_rule() noexcept;

/// One model provider endpoint.
struct provider_settings {
  std::string name;
  /// openai | openai-compatible | openrouter | qwen | kimi | claude
  std::string type = "openai-compatible";
  /// Empty: the type's public default (required for openai-compatible).
  std::string base_url;
  /// Name of the environment variable holding the API key (allowed by `key_env_policy`).
  std::string api_key_env;
  /// The API key itself (prefer api_key_env; never logged or returned by the API).
  std::string api_key;
  /// Models this provider offers; agents may only name these (when non-empty).
  std::vector<std::string> models;
  /// The tokens a prompt to these models may take; the run cuts history to fit.
  std::uint32_t context_window = default_context_window;

  /// The key to use: `api_key`, else the value of `api_key_env` in `environment` when
  /// `policy` allows that variable (else none: the config load already refused it).
  std::string resolve_api_key(const std::map<std::string, std::string>& environment,
                              const key_env_policy& policy = {}) const;
};

/// What a conversation does with a message that arrives while a run is active.
enum class queue_policy {
  /// Run it after the active run ends.
  followup,
  /// Hand it to the active run, which sees it before its next model round.
  steer,
  /// Cancel the active run and run the new message.
  interrupt,
  /// Gather everything that arrives during the run into one follow-up message.
  collect,
};

std::string_view to_string(queue_policy p) noexcept;
expected<queue_policy> parse_queue_policy(std::string_view name);

/// When and how much of a conversation's prompt is compressed (`[compression]` of the
/// settings, issue 16; the same for every agent of a node). See prompt/compression.hpp.
struct compression_settings {
  /// Compress once the estimated prompt reaches this share of the context window.
  double trigger = 0.50;
  /// Messages at the start that always stay (widened to keep a tool call with its results).
  std::size_t protect_head = 1;
  /// Messages at the end that always stay (widened the same way).
  std::size_t protect_tail = 20;
  /// The fewest messages between head and tail worth summarising.
  std::size_t min_middle = 5;
};

/// One agent.
struct agent_settings {
  std::string name;
  std::string provider;
  std::string model;
  std::string fast_model;
  std::string fallback_model;
  std::string system_prompt;
  std::vector<std::string> tools;
  unsigned max_rounds = 50;
  std::chrono::seconds timeout{600};
  queue_policy queue = queue_policy::followup;
  /// The tokens a prompt may take; 0: the provider's `context_window`.
  std::uint32_t context_window = 0;
  /// The most estimated tokens of the conversation's earlier turns a round's prompt
  /// carries (`actors.history_max_tokens`, set by the node for every agent); 0: only the
  /// context window bounds them.
  std::uint32_t history_max_tokens = 0;
  /// When a run compresses its prompt (`[compression]`, set by the node for every agent).
  compression_settings compression;
  /// Runs recall the user's memories into a `<memory_context>` block (issue 15).
  bool memory = true;
  /// The agent is trusted: what it proposes is written active (sensitive content still
  /// waits for review).
  bool memory_autoapprove = false;
  /// Ranked items in the block (pinned ones come on top, up to 6 more).
  std::uint32_t memory_max_items = 6;
  /// Characters of all items in the block together.
  std::uint32_t memory_max_chars = 4200;
  /// Web search and fetch (`web_search`): off unless asked for.
  web_search_mode web_search = web_search_mode::off;
  /// The skills the agent sees (issue 19): names, or "*" for every installed skill;
  /// empty: none.
  std::vector<std::string> skills;
  /// Per tool, when a call waits for a human (`approval = { exec = "always" }`); it
  /// overrides the tool's own setting (approval.hpp).
  std::map<std::string, approval_mode, std::less<>> approval;
  /// "" or "strict" (code_interpreter, exec and write-capable HTTP tools:
  /// agent_initiated).
  std::string approval_profile;
  /// Seconds a pending approval waits before it is denied; 0: the node's
  /// `tools.approval_timeout_s`.
  std::uint32_t approval_timeout_s = 0;

  /// True when the agent's `skills` list names `skill` or is "*".
  bool skill_enabled(std::string_view skill) const noexcept;
};

/// The bounds of `memory_max_items` and `memory_max_chars`.
inline constexpr std::uint32_t max_memory_items = 12;
inline constexpr std::uint32_t min_memory_chars = 100;
inline constexpr std::uint32_t max_memory_chars = 100'000;

/// The context window a run of `agent` on `provider` budgets its prompt with: the
/// agent's own when set, else the provider's.
std::uint32_t effective_context_window(const agent_settings& agent,
                                       const provider_settings& provider) noexcept;

/// Checks providers and agents against each other and against the known tool names:
/// unique names, a known provider type, an agent's provider, models (when the provider
/// lists them) and tools must exist. Errors name the agent or provider.
expected<void> validate_agents(const std::vector<provider_settings>& providers,
                               const std::vector<agent_settings>& agents,
                               const std::vector<std::string>& known_tools);

/// The providers and agents troupe uses when the config declares none, so that a first
/// `make run` gives a working agent named "assistant".
struct embedded_catalog {
  std::vector<provider_settings> providers;
  std::vector<agent_settings> agents;
  /// True when the agent talks to the scripted demo model (mock-llm), not a real LLM.
  bool demo = false;
};

/// With OPENAI_API_KEY in `environment`: an "openai" provider (OPENAI_BASE_URL when set)
/// and the model TROUPE_MODEL (default gpt-4o-mini). Otherwise the scripted demo model
/// served at `demo_base_url`.
embedded_catalog make_embedded_catalog(const std::map<std::string, std::string>& environment,
                                       std::string_view demo_base_url);

} // namespace troupe
