#pragma once

/// \file
/// Custom tools and web search engines as written in the config file (`[[tools]]`,
/// `[[search_engines]]`) or sent to `/api/v1/tools` and `/api/v1/search_engines` (issue
/// 18). These keys are a contract:
///
///     [[tools]]
///     name = "weather"                  # 1-64 of A-Z a-z 0-9 _ -; unique among all tools
///     description = "Current weather for a city"
///     kind = "http"                     # http | script
///     parameters = { type = "object", properties = { city = { type = "string" } },
///                    required = ["city"] }          # JSON Schema (a table or a JSON string)
///     timeout = 20                      # seconds, 1..600 (default 30)
///     enabled = true
///     agents = ["assistant"]            # who may use it; empty or absent: every agent
///     method = "GET"                    # http: GET | POST | PUT | PATCH | DELETE
///     url = "https://api.example.org/weather?q={city}"  # {param}: percent-encoded
///     headers = { Authorization = "Bearer ${TROUPE_KEY_WEATHER}", X-City = "{city}" }
///     body = '{"city": "{city}"}'       # {param}: JSON-escaped
///     max_response_bytes = 1048576      # 1..33554432 (default 1 MiB)
///     allow_private = false             # true: loopback and private addresses allowed
///
///     [[tools]]
///     name = "word_count"
///     kind = "script"
///     language = "python"               # python | javascript | bash
///     code = "import json,sys; a=json.load(sys.stdin); print(len(a['text'].split()))"
///     # or file = "/etc/troupe/tools/word_count.py" (read at every call)
///
///     [[search_engines]]
///     name = "tavily"                   # unique
///     type = "tavily"                   # tavily | serpapi | brave | searxng
///     key_env = "TROUPE_KEY_TAVILY"     # the variable holding the key (key_env_policy)
///     base_url = ""                     # empty: the type's public endpoint (searxng: required)
///     enabled = true
///     default = true                    # tried first; at most one
///
/// Secrets in headers: `${NAME}` in a header value is replaced, at each call, by the
/// value of the environment variable NAME, which `key_env_policy` must allow. Only header
/// values expand `${…}`; a header whose name says it carries a credential (Authorization,
/// Cookie, or a name containing "key", "token", "secret" or "auth") must take any fixed
/// text it holds from such a variable, so a key is never written into the config or the
/// database. An argument's value never expands `${…}` or `{…}`: it stays data.
///
/// TOML cannot have both a `[tools]` table and `[[tools]]` entries: a file that declares
/// custom tools sets `tools.allow_host`, `tools.timeout_ms` and `tools.workspace_max_bytes`
/// with flags or TROUPE_TOOLS_* variables.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "troupe/runtime/agent_config.hpp"
#include "troupe/runtime/error.hpp"

namespace troupe {

class json_writer;
class json_object;

/// What a custom tool does when called.
enum class custom_tool_kind { http, script };

std::string_view to_string(custom_tool_kind k) noexcept;
expected<custom_tool_kind> parse_custom_tool_kind(std::string_view name);

/// The language of a script tool.
enum class script_language { python, javascript, bash };

std::string_view to_string(script_language l) noexcept;
expected<script_language> parse_script_language(std::string_view name);

/// The default and the bounds of a custom tool's `timeout`.
inline constexpr std::chrono::seconds default_custom_tool_timeout{30};
inline constexpr std::chrono::seconds max_custom_tool_timeout{600};
/// The default and the bound of an HTTP tool's `max_response_bytes`.
inline constexpr std::size_t default_tool_response_bytes = 1024 * 1024;
inline constexpr std::size_t max_tool_response_bytes = 32 * 1024 * 1024;

/// One header of an HTTP tool: its name and its value template.
struct tool_header {
  std::string name;
  std::string value;

  friend bool operator==(const tool_header&, const tool_header&) = default;
};

/// A custom tool.
struct custom_tool_settings {
  std::string name;
  std::string description;
  custom_tool_kind kind = custom_tool_kind::http;
  /// The JSON Schema of the arguments, as JSON text.
  std::string parameters = R"({"type":"object","properties":{}})";
  std::chrono::seconds timeout = default_custom_tool_timeout;
  bool enabled = true;
  /// The agents that may use it (names); empty: every agent.
  std::vector<std::string> agents;

  // kind http
  std::string method = "GET";
  std::string url;
  std::vector<tool_header> headers;
  std::string body;
  std::size_t max_response_bytes = default_tool_response_bytes;
  bool allow_private = false;

  // kind script
  script_language language = script_language::python;
  std::string code;
  std::string file;

  /// `approval`: when a call waits for a human (approval.hpp); unset: the agent decides.
  std::optional<approval_mode> approval;

  /// Not a key: set for a tool the config file declares, which the API then refuses to
  /// change or delete (409: change it in the file).
  bool declared = false;

  /// True when `agent` may use the tool.
  bool offered_to(std::string_view agent) const noexcept;

  friend bool operator==(const custom_tool_settings&, const custom_tool_settings&) = default;
};

/// The environment variables the `${NAME}` references of `text` name, in order.
std::vector<std::string> env_references(std::string_view text);

/// Checks one custom tool on its own: its name, kind, method, URL (http or https; no
/// placeholder in the scheme or host), headers (names, `${NAME}` allowed by `policy`,
/// credentials only from variables), bounds, a script's language and exactly one of code
/// and file, and that `parameters` is a JSON object. Errors start with `where` (e.g.
/// "tool 'weather'") and name the field. Whether the schema compiles and every
/// placeholder is a parameter is checked where the tool is built (tools/custom_tools.hpp).
expected<void> validate_custom_tool(const custom_tool_settings& tool, const key_env_policy& policy,
                                    std::string_view where);

/// `validate_custom_tool` for each, unique names, and every name in `agents` lists among
/// `agents` (the declared agents) unless `agents` is empty.
expected<void> validate_custom_tools(const std::vector<custom_tool_settings>& tools,
                                     const std::vector<agent_settings>& agents,
                                     const key_env_policy& policy);

/// Writes `tool` as one JSON object with the config's key names and `declared` (the API's
/// shape and the tools table's `config_json`).
void write_custom_tool(json_writer& w, const custom_tool_settings& tool);

/// Applies the fields present in `object` onto `tool` (every field for a new tool, some
/// for a change). Fails with an error naming the first wrong or unknown field. `declared`
/// is taken only when `with_declared` (what storage wrote), else ignored (the API's
/// answers carry it, so a tool read and sent back is accepted).
expected<void> read_custom_tool(const json_object& object, custom_tool_settings& tool,
                                bool with_declared = false);

/// `[web]`: the limits of web_fetch and web_search.
struct web_settings {
  /// web_fetch may read loopback, private and link-local addresses.
  bool fetch_allow_private = false;
  /// Longest a web_fetch may take, redirects included.
  std::chrono::milliseconds fetch_timeout{15'000};
  /// Bytes of a page read at most; the rest is not read.
  std::size_t fetch_max_bytes = 2 * 1024 * 1024;
  /// Characters of the page's text returned at most.
  std::size_t fetch_max_chars = 20'000;
  /// Longest one engine may take to answer a search.
  std::chrono::milliseconds search_timeout{20'000};
};

/// A web search engine's API.
enum class search_engine_type { tavily, serpapi, brave, searxng };

std::string_view to_string(search_engine_type t) noexcept;
expected<search_engine_type> parse_search_engine_type(std::string_view name);
/// The type's public endpoint (empty for searxng, which is always self-hosted).
std::string_view default_search_base_url(search_engine_type t) noexcept;

/// One external search engine.
struct search_engine_settings {
  std::string name;
  search_engine_type type = search_engine_type::tavily;
  /// The environment variable holding the API key (key_env_policy). SearXNG needs none.
  std::string key_env;
  /// Empty: the type's public endpoint.
  std::string base_url;
  bool enabled = true;
  /// Tried first.
  bool is_default = false;
  /// Not a key: set for an engine the config file declares (read-only over the API).
  bool declared = false;

  /// `base_url`, else the type's default, without a trailing '/'.
  std::string effective_base_url() const;

  friend bool operator==(const search_engine_settings&, const search_engine_settings&) = default;
};

/// Checks one engine: its name, a key variable allowed by `policy` (required except for
/// searxng), an http(s) base URL (required for searxng). Errors start with `where`.
expected<void> validate_search_engine(const search_engine_settings& engine,
                                      const key_env_policy& policy, std::string_view where);

/// `validate_search_engine` for each, unique names, at most one default.
expected<void> validate_search_engines(const std::vector<search_engine_settings>& engines,
                                       const key_env_policy& policy);

/// The engines to try for a search, in order: the enabled default first, then the other
/// enabled ones in their order.
std::vector<search_engine_settings>
search_order(const std::vector<search_engine_settings>& engines);

/// Writes `engine` as one JSON object (name, type, key_env, base_url, effective_base_url,
/// enabled, default, declared).
void write_search_engine(json_writer& w, const search_engine_settings& engine);

/// Applies the fields present in `object` onto `engine`; errors name the field. The
/// answer-only fields `effective_base_url` and `declared` are ignored.
expected<void> read_search_engine(const json_object& object, search_engine_settings& engine);

} // namespace troupe
