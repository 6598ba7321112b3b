// Custom tools and search engines (issue 18): their vocabulary, checks, JSON shape and
// the TOML readers settings.cpp calls for `[[tools]]` and `[[search_engines]]`.

#include "troupe/runtime/tool_config.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <simdjson.h>

#include "toml_entry.hpp"
#include "tool_config_toml.hpp"
#include "troupe/runtime/json_object.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe {

namespace {

constexpr std::size_t max_description = 8 * 1024;
// Script code goes to the interpreter as one argument, and Linux caps one argument at 128
// KiB (MAX_ARG_STRLEN).
constexpr std::size_t max_code = 100 * 1024;
constexpr std::size_t max_template = 64 * 1024;

constexpr std::array<std::string_view, 5> http_methods = {"GET", "POST", "PUT", "PATCH", "DELETE"};

bool valid_name(std::string_view name) noexcept {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-';
  });
}

bool valid_env_name(std::string_view name) noexcept {
  return !name.empty() && std::isdigit(static_cast<unsigned char>(name.front())) == 0 &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
         });
}

// RFC 9110 token characters: what a header name may hold.
bool valid_header_name(std::string_view name) noexcept {
  constexpr std::string_view extra = "!#$%&'*+-.^_`|~";
  return !name.empty() && name.size() <= 256 && std::all_of(name.begin(), name.end(), [&](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
           extra.find(c) != std::string_view::npos;
  });
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  });
  return out;
}

// A header whose name says it carries a credential: its fixed text must not be a key.
bool credential_header(std::string_view name) {
  const auto n = lower(name);
  return n == "authorization" || n == "proxy-authorization" || n == "cookie" ||
         n.find("key") != std::string::npos || n.find("token") != std::string::npos ||
         n.find("secret") != std::string::npos || n.find("auth") != std::string::npos;
}

// True when `text` holds a `{param}` placeholder (letters, digits, '_' or '-' in braces)
// that is not the inside of a `${NAME}` reference.
bool has_placeholder(std::string_view text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '{' || (i > 0 && text[i - 1] == '$')) {
      continue;
    }
    std::size_t end = i + 1;
    while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) != 0 ||
                                 text[end] == '_' || text[end] == '-')) {
      ++end;
    }
    if (end > i + 1 && end < text.size() && text[end] == '}') {
      return true;
    }
  }
  return false;
}

tl::unexpected<error> bad(std::string_view where, std::string_view field, std::string_view what) {
  return fail(errc::invalid_argument, fmt::format("{}: {}: {}", where, field, what));
}

} // namespace

// --- vocabulary -----------------------------------------------------------------------------

std::string_view to_string(custom_tool_kind k) noexcept {
  return k == custom_tool_kind::script ? "script" : "http";
}

expected<custom_tool_kind> parse_custom_tool_kind(std::string_view name) {
  if (name == "http") {
    return custom_tool_kind::http;
  }
  if (name == "script") {
    return custom_tool_kind::script;
  }
  return fail(errc::invalid_argument, fmt::format("kind: '{}' is not one of http, script", name));
}

std::string_view to_string(script_language l) noexcept {
  switch (l) {
    case script_language::python:
      return "python";
    case script_language::javascript:
      return "javascript";
    case script_language::bash:
      return "bash";
  }
  return "python";
}

expected<script_language> parse_script_language(std::string_view name) {
  for (auto l : {script_language::python, script_language::javascript, script_language::bash}) {
    if (to_string(l) == name) {
      return l;
    }
  }
  return fail(errc::invalid_argument,
              fmt::format("language: '{}' is not one of python, javascript, bash", name));
}

std::string_view to_string(search_engine_type t) noexcept {
  switch (t) {
    case search_engine_type::tavily:
      return "tavily";
    case search_engine_type::serpapi:
      return "serpapi";
    case search_engine_type::brave:
      return "brave";
    case search_engine_type::searxng:
      return "searxng";
  }
  return "tavily";
}

expected<search_engine_type> parse_search_engine_type(std::string_view name) {
  for (auto t : {search_engine_type::tavily, search_engine_type::serpapi, search_engine_type::brave,
                 search_engine_type::searxng}) {
    if (to_string(t) == name) {
      return t;
    }
  }
  return fail(errc::invalid_argument,
              fmt::format("type: '{}' is not one of tavily, serpapi, brave, searxng", name));
}

std::string_view default_search_base_url(search_engine_type t) noexcept {
  switch (t) {
    case search_engine_type::tavily:
      return "https://api.tavily.com";
    case search_engine_type::serpapi:
      return "https://serpapi.com";
    case search_engine_type::brave:
      return "https://api.search.brave.com";
    case search_engine_type::searxng:
      return "";
  }
  return "";
}

std::string search_engine_settings::effective_base_url() const {
  std::string url = base_url.empty() ? std::string(default_search_base_url(type)) : base_url;
  while (!url.empty() && url.back() == '/') {
    url.pop_back();
  }
  return url;
}

bool custom_tool_settings::offered_to(std::string_view agent) const noexcept {
  return agents.empty() || std::find(agents.begin(), agents.end(), agent) != agents.end();
}

std::vector<std::string> env_references(std::string_view text) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i + 1 < text.size(); ++i) {
    if (text[i] == '$' && text[i + 1] == '{') {
      const auto close = text.find('}', i + 2);
      if (close == std::string_view::npos) {
        break;
      }
      out.emplace_back(text.substr(i + 2, close - i - 2));
      i = close;
    }
  }
  return out;
}

// --- checks ---------------------------------------------------------------------------------

expected<void> validate_custom_tool(const custom_tool_settings& t, const key_env_policy& policy,
                                    std::string_view where) {
  if (!valid_name(t.name)) {
    return bad(where, "name", "must be 1-64 of A-Z a-z 0-9 _ -");
  }
  if (t.description.size() > max_description) {
    return bad(where, "description", "is longer than 8 KiB");
  }
  {
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    simdjson::dom::object object;
    if (parser.parse(t.parameters).get(root) != simdjson::SUCCESS ||
        root.get_object().get(object) != simdjson::SUCCESS) {
      return bad(where, "parameters", "must be a JSON Schema object");
    }
    std::string_view type;
    if (auto e = object["type"];
        e.error() == simdjson::SUCCESS &&
        (e.get_string().get(type) != simdjson::SUCCESS || type != "object")) {
      return bad(where, "parameters",
                 "the schema's type must be \"object\" (arguments are an object)");
    }
  }
  if (t.timeout < std::chrono::seconds(1) || t.timeout > max_custom_tool_timeout) {
    return bad(where, "timeout",
               fmt::format("must be 1 to {} seconds", max_custom_tool_timeout.count()));
  }
  for (const auto& a : t.agents) {
    if (a.empty()) {
      return bad(where, "agents", "an agent name must not be empty");
    }
  }
  if (t.kind == custom_tool_kind::http) {
    if (!t.code.empty() || !t.file.empty()) {
      return bad(where, !t.code.empty() ? "code" : "file", "is only for kind \"script\"");
    }
    if (std::find(http_methods.begin(), http_methods.end(), t.method) == http_methods.end()) {
      return bad(where, "method", "must be GET, POST, PUT, PATCH or DELETE");
    }
    const std::string_view url = t.url;
    const auto scheme_end = url.find("://");
    const auto scheme =
        scheme_end == std::string_view::npos ? std::string_view{} : url.substr(0, scheme_end);
    if (scheme != "http" && scheme != "https") {
      return bad(where, "url", "must start with http:// or https://");
    }
    const auto authority_end = url.find_first_of("/?#", scheme_end + 3);
    const auto authority = url.substr(scheme_end + 3, authority_end == std::string_view::npos
                                                          ? std::string_view::npos
                                                          : authority_end - scheme_end - 3);
    if (authority.empty()) {
      return bad(where, "url", "has no host");
    }
    if (authority.find('{') != std::string_view::npos ||
        authority.find('$') != std::string_view::npos) {
      return bad(where, "url",
                 "a placeholder may not stand in the host (only in the path, query or fragment)");
    }
    if (url.size() > max_template || t.body.size() > max_template) {
      return bad(where, url.size() > max_template ? "url" : "body", "is longer than 64 KiB");
    }
    if (url.find("${") != std::string_view::npos || t.body.find("${") != std::string_view::npos) {
      return bad(where, url.find("${") != std::string_view::npos ? "url" : "body",
                 "${NAME} references are expanded in header values only");
    }
    if (!t.body.empty() && (t.method == "GET" || t.method == "DELETE")) {
      return bad(where, "body", fmt::format("a {} request sends no body", t.method));
    }
    if (t.max_response_bytes == 0 || t.max_response_bytes > max_tool_response_bytes) {
      return bad(where, "max_response_bytes",
                 fmt::format("must be 1 to {}", max_tool_response_bytes));
    }
    for (const auto& h : t.headers) {
      const auto field = fmt::format("headers.{}", h.name);
      if (!valid_header_name(h.name)) {
        return bad(where, field, "is not a valid header name");
      }
      if (h.value.find_first_of("\r\n") != std::string::npos || h.value.size() > max_template) {
        return bad(where, field, "must be one line of at most 64 KiB");
      }
      const auto refs = env_references(h.value);
      for (const auto& name : refs) {
        if (!valid_env_name(name)) {
          return bad(where, field,
                     fmt::format("'${{{}}}' is not an environment variable name", name));
        }
        if (auto allowed = policy.check(fmt::format("{}: {}", where, field), name); !allowed) {
          return tl::unexpected(allowed.error());
        }
      }
      if (credential_header(h.name) && refs.empty() && !has_placeholder(h.value)) {
        return bad(where, field,
                   "a credential must come from an environment variable (\"Bearer "
                   "${TROUPE_KEY_…}\"), never be written in the tool's definition");
      }
    }
  } else {
    if (!t.url.empty() || !t.body.empty() || !t.headers.empty()) {
      return bad(where,
                 !t.url.empty()    ? "url"
                 : !t.body.empty() ? "body"
                                   : "headers",
                 "is only for kind \"http\"");
    }
    if (t.code.empty() == t.file.empty()) {
      return bad(where, "code", "a script tool needs exactly one of code and file");
    }
    if (t.code.size() > max_code) {
      return bad(where, "code", "is longer than 100 KiB");
    }
  }
  return {};
}

expected<void> validate_custom_tools(const std::vector<custom_tool_settings>& tools,
                                     const std::vector<agent_settings>& agents,
                                     const key_env_policy& policy) {
  std::set<std::string_view> names;
  for (const auto& t : tools) {
    const auto where = fmt::format("tool '{}'", t.name);
    if (auto ok = validate_custom_tool(t, policy, where); !ok) {
      return ok;
    }
    if (!names.insert(t.name).second) {
      return fail(errc::invalid_argument, fmt::format("two tools are named '{}'", t.name));
    }
    if (agents.empty()) {
      continue;
    }
    for (const auto& a : t.agents) {
      const bool known = std::any_of(agents.begin(), agents.end(),
                                     [&](const agent_settings& s) { return s.name == a; });
      if (!known) {
        return bad(where, "agents", fmt::format("no agent is named '{}'", a));
      }
    }
  }
  return {};
}

expected<void> validate_search_engine(const search_engine_settings& e, const key_env_policy& policy,
                                      std::string_view where) {
  if (!valid_name(e.name)) {
    return bad(where, "name", "must be 1-64 of A-Z a-z 0-9 _ -");
  }
  if (e.key_env.empty() && e.type != search_engine_type::searxng) {
    return bad(
        where, "key_env",
        fmt::format("a {} engine needs the variable holding its API key", to_string(e.type)));
  }
  if (!e.key_env.empty() && !valid_env_name(e.key_env)) {
    return bad(where, "key_env", "is not an environment variable name");
  }
  if (auto allowed = policy.check(fmt::format("{}: key_env", where), e.key_env); !allowed) {
    return allowed;
  }
  if (e.base_url.empty() && e.type == search_engine_type::searxng) {
    return bad(where, "base_url", "a searxng engine needs the URL of its instance");
  }
  if (!e.base_url.empty() && !e.base_url.starts_with("http://") &&
      !e.base_url.starts_with("https://")) {
    return bad(where, "base_url", "must start with http:// or https://");
  }
  return {};
}

expected<void> validate_search_engines(const std::vector<search_engine_settings>& engines,
                                       const key_env_policy& policy) {
  std::set<std::string_view> names;
  std::size_t defaults = 0;
  for (const auto& e : engines) {
    if (auto ok = validate_search_engine(e, policy, fmt::format("search engine '{}'", e.name));
        !ok) {
      return ok;
    }
    if (!names.insert(e.name).second) {
      return fail(errc::invalid_argument, fmt::format("two search engines are named '{}'", e.name));
    }
    defaults += e.is_default ? 1 : 0;
  }
  if (defaults > 1) {
    return fail(errc::invalid_argument, "search engines: at most one may be the default");
  }
  return {};
}

std::vector<search_engine_settings>
search_order(const std::vector<search_engine_settings>& engines) {
  std::vector<search_engine_settings> out;
  for (const auto& e : engines) {
    if (e.enabled && e.is_default) {
      out.push_back(e);
    }
  }
  for (const auto& e : engines) {
    if (e.enabled && !e.is_default) {
      out.push_back(e);
    }
  }
  return out;
}

// --- JSON -----------------------------------------------------------------------------------

void write_custom_tool(json_writer& w, const custom_tool_settings& t) {
  w.begin_object();
  w.key("name").value(t.name).key("description").value(t.description);
  w.key("kind").value(to_string(t.kind)).key("parameters").raw(t.parameters);
  w.key("timeout").value(t.timeout.count()).key("enabled").value(t.enabled);
  w.key("agents").begin_array();
  for (const auto& a : t.agents) {
    w.value(a);
  }
  w.end_array();
  if (t.kind == custom_tool_kind::http) {
    w.key("method").value(t.method).key("url").value(t.url);
    w.key("headers").begin_object();
    for (const auto& h : t.headers) {
      w.key(h.name).value(h.value);
    }
    w.end_object();
    w.key("body").value(t.body).key("max_response_bytes").value(t.max_response_bytes);
    w.key("allow_private").value(t.allow_private);
  } else {
    w.key("language").value(to_string(t.language));
    w.key("code").value(t.code).key("file").value(t.file);
  }
  w.key("approval");
  if (t.approval) {
    w.value(to_string(*t.approval));
  } else {
    w.value(nullptr);
  }
  w.key("declared").value(t.declared);
  w.end_object();
}

expected<void> read_custom_tool(const json_object& o, custom_tool_settings& t, bool with_declared) {
  if (with_declared) {
    auto declared = o.boolean("declared");
    if (!declared) {
      return tl::unexpected(declared.error());
    }
    t.declared = declared->value_or(false);
  }
  static const std::set<std::string_view> known = {
      "name",          "description", "kind", "parameters", "timeout", "enabled",
      "agents",        "method",      "url",  "headers",    "body",    "max_response_bytes",
      "allow_private", "language",    "code", "file",       "approval"};
  for (const auto key : o.keys()) {
    // `declared` is in every answer of the API: a tool sent back as it was read is fine.
    if (!known.contains(key) && key != "declared") {
      return o.problem(key, "unknown field");
    }
  }
  const auto text = [&](std::string_view key, std::string& into) -> expected<void> {
    auto v = o.text(key);
    if (!v) {
      return tl::unexpected(v.error());
    }
    if (*v) {
      into = std::move(**v);
    }
    return {};
  };
  for (const auto& [key, into] : {std::pair<std::string_view, std::string*>{"name", &t.name},
                                  {"description", &t.description},
                                  {"method", &t.method},
                                  {"url", &t.url},
                                  {"body", &t.body},
                                  {"code", &t.code},
                                  {"file", &t.file}}) {
    if (auto ok = text(key, *into); !ok) {
      return ok;
    }
  }
  std::string word;
  if (auto ok = text("kind", word); !ok) {
    return ok;
  }
  if (!word.empty()) {
    auto kind = parse_custom_tool_kind(word);
    if (!kind) {
      return tl::unexpected(kind.error());
    }
    t.kind = *kind;
  }
  word.clear();
  if (auto ok = text("language", word); !ok) {
    return ok;
  }
  if (!word.empty()) {
    auto language = parse_script_language(word);
    if (!language) {
      return tl::unexpected(language.error());
    }
    t.language = *language;
  }
  if (auto p = o.element("parameters")) {
    if (!p->is_object()) {
      return o.problem("parameters", "must be a JSON Schema object");
    }
    t.parameters = simdjson::minify(*p);
  }
  auto timeout = o.integer("timeout");
  auto max_bytes = o.integer("max_response_bytes");
  auto enabled = o.boolean("enabled");
  auto allow_private = o.boolean("allow_private");
  for (const auto* failed :
       {timeout ? nullptr : &timeout.error(), max_bytes ? nullptr : &max_bytes.error(),
        enabled ? nullptr : &enabled.error(), allow_private ? nullptr : &allow_private.error()}) {
    if (failed != nullptr) {
      return tl::unexpected(*failed);
    }
  }
  if (*timeout) {
    if (**timeout < 1 || **timeout > max_custom_tool_timeout.count()) {
      return o.problem("timeout",
                       fmt::format("must be 1 to {} seconds", max_custom_tool_timeout.count()));
    }
    t.timeout = std::chrono::seconds(**timeout);
  }
  if (*max_bytes) {
    if (**max_bytes < 1 || **max_bytes > static_cast<std::int64_t>(max_tool_response_bytes)) {
      return o.problem("max_response_bytes",
                       fmt::format("must be 1 to {}", max_tool_response_bytes));
    }
    t.max_response_bytes = static_cast<std::size_t>(**max_bytes);
  }
  t.enabled = enabled->value_or(t.enabled);
  t.allow_private = allow_private->value_or(t.allow_private);
  // `approval` (issue 19): a mode, or null for none (the agent's settings decide).
  if (auto a = o.element("approval")) {
    if (a->is_null()) {
      t.approval.reset();
    } else {
      std::string_view mode_text;
      if (a->get_string().get(mode_text) != simdjson::SUCCESS) {
        return o.problem("approval", "must be \"never\", \"agent_initiated\", \"always\" or null");
      }
      auto mode = parse_approval_mode(mode_text);
      if (!mode) {
        return o.problem("approval", "must be \"never\", \"agent_initiated\", \"always\" or null");
      }
      t.approval = *mode;
    }
  }
  if (o.has("agents")) {
    auto agents = o.text_list("agents");
    if (!agents) {
      return tl::unexpected(agents.error());
    }
    t.agents = std::move(*agents);
  }
  if (auto h = o.element("headers")) {
    simdjson::dom::object object;
    if (h->get_object().get(object) != simdjson::SUCCESS) {
      return o.problem("headers", "must be an object of header names to values");
    }
    t.headers.clear();
    for (auto field : object) {
      std::string_view value;
      if (field.value.get_string().get(value) != simdjson::SUCCESS) {
        return o.problem(fmt::format("headers.{}", field.key), "must be a string");
      }
      t.headers.push_back({std::string(field.key), std::string(value)});
    }
  }
  return {};
}

void write_search_engine(json_writer& w, const search_engine_settings& e) {
  w.begin_object();
  w.key("name").value(e.name).key("type").value(to_string(e.type));
  w.key("key_env").value(e.key_env).key("base_url").value(e.base_url);
  w.key("effective_base_url").value(e.effective_base_url());
  w.key("enabled").value(e.enabled).key("default").value(e.is_default);
  w.key("declared").value(e.declared);
  w.end_object();
}

expected<void> read_search_engine(const json_object& o, search_engine_settings& e) {
  // `effective_base_url` and `declared` are in every answer of the API: ignored here.
  static const std::set<std::string_view> known = {
      "name",    "type", "key_env", "base_url", "enabled", "default", "effective_base_url",
      "declared"};
  for (const auto key : o.keys()) {
    if (!known.contains(key)) {
      return o.problem(key, "unknown field");
    }
  }
  auto name = o.text("name");
  auto type = o.text("type");
  auto key_env = o.text("key_env");
  auto base_url = o.text("base_url");
  auto enabled = o.boolean("enabled");
  auto is_default = o.boolean("default");
  for (const auto* failed :
       {name ? nullptr : &name.error(), type ? nullptr : &type.error(),
        key_env ? nullptr : &key_env.error(), base_url ? nullptr : &base_url.error(),
        enabled ? nullptr : &enabled.error(), is_default ? nullptr : &is_default.error()}) {
    if (failed != nullptr) {
      return tl::unexpected(*failed);
    }
  }
  if (*type) {
    auto parsed = parse_search_engine_type(**type);
    if (!parsed) {
      return tl::unexpected(parsed.error());
    }
    e.type = *parsed;
  }
  e.name = name->value_or(e.name);
  e.key_env = key_env->value_or(e.key_env);
  e.base_url = base_url->value_or(e.base_url);
  e.enabled = enabled->value_or(e.enabled);
  e.is_default = is_default->value_or(e.is_default);
  return {};
}

// --- TOML -----------------------------------------------------------------------------------

namespace detail {

namespace {

// A TOML value as JSON (for `parameters` written as a table).
void write_toml_as_json(json_writer& w, const toml::node& node) {
  if (const auto* table = node.as_table()) {
    w.begin_object();
    for (const auto& [key, value] : *table) {
      w.key(key.str());
      write_toml_as_json(w, value);
    }
    w.end_object();
  } else if (const auto* array = node.as_array()) {
    w.begin_array();
    for (const auto& item : *array) {
      write_toml_as_json(w, item);
    }
    w.end_array();
  } else if (auto s = node.value<std::string>(); s && node.is_string()) {
    w.value(*s);
  } else if (node.is_integer()) {
    w.value(*node.value<std::int64_t>());
  } else if (node.is_floating_point()) {
    w.value(*node.value<double>());
  } else if (node.is_boolean()) {
    w.value(*node.value<bool>());
  } else {
    // Dates and times: JSON has none; their TOML text as a string.
    std::ostringstream text;
    node.visit([&](const auto& v) { text << v; });
    w.value(text.str());
  }
}

// `headers = { Name = "value" }`: header names to strings.
expected<void> read_headers(toml_entry& r, std::string_view key, std::vector<tool_header>& into) {
  const auto* node = r.take(key);
  if (node == nullptr) {
    return {};
  }
  const auto* table = node->as_table();
  if (table == nullptr) {
    return r.wrong(key, "a table of header names to strings");
  }
  for (const auto& [name, value] : *table) {
    if (!value.is_string()) {
      return r.wrong(fmt::format("{}.{}", key, name.str()), "a string");
    }
    into.push_back({std::string(name.str()), *value.value<std::string>()});
  }
  return {};
}

// A JSON Schema: a TOML table, or a string holding JSON.
expected<void> read_schema(toml_entry& r, std::string_view key, std::string& into) {
  const auto* node = r.take(key);
  if (node == nullptr) {
    return {};
  }
  if (node->is_string()) {
    into = *node->value<std::string>();
    return {};
  }
  if (!node->is_table()) {
    return r.wrong(key, "a table (the JSON Schema) or a string of JSON");
  }
  json_writer w;
  write_toml_as_json(w, *node);
  into = std::move(w).str();
  return {};
}

} // namespace

expected<custom_tool_settings> read_tool_entry(const toml::table& table,
                                               std::string_view source_name, std::size_t index) {
  toml_entry r(table, "tools", source_name, index);
  custom_tool_settings t;
  std::string kind = std::string(to_string(t.kind));
  std::string language = std::string(to_string(t.language));
  std::int64_t timeout = t.timeout.count();
  std::int64_t max_bytes = static_cast<std::int64_t>(t.max_response_bytes);
  std::string approval;
  auto ok = first_failure(
      r.text("name", t.name), r.text("approval", approval), r.text("description", t.description),
      r.text("kind", kind), read_schema(r, "parameters", t.parameters),
      r.number("timeout", timeout, 1, max_custom_tool_timeout.count()),
      r.boolean("enabled", t.enabled), r.text_list("agents", t.agents), r.text("method", t.method),
      r.text("url", t.url), read_headers(r, "headers", t.headers), r.text("body", t.body),
      r.number("max_response_bytes", max_bytes, 1,
               static_cast<std::int64_t>(max_tool_response_bytes)),
      r.boolean("allow_private", t.allow_private), r.text("language", language),
      r.text("code", t.code), r.text("file", t.file));
  if (ok) {
    ok = r.no_unknown_keys();
  }
  if (!ok) {
    return tl::unexpected(ok.error());
  }
  auto parsed_kind = parse_custom_tool_kind(kind);
  auto parsed_language = parse_script_language(language);
  const error* wrong = !parsed_kind       ? &parsed_kind.error()
                       : !parsed_language ? &parsed_language.error()
                                          : nullptr;
  if (wrong != nullptr) {
    return fail(errc::invalid_argument,
                fmt::format("{}: [[tools]] entry {} ('{}'): {}", source_name, index + 1, t.name,
                            wrong->message));
  }
  if (!approval.empty()) {
    auto mode = parse_approval_mode(approval);
    if (!mode) {
      return fail(errc::invalid_argument,
                  fmt::format("{}: [[tools]] entry {} ('{}'): {}", source_name, index + 1, t.name,
                              mode.error().message));
    }
    t.approval = *mode;
  }
  t.kind = *parsed_kind;
  t.language = *parsed_language;
  t.timeout = std::chrono::seconds(timeout);
  t.max_response_bytes = static_cast<std::size_t>(max_bytes);
  return t;
}

expected<search_engine_settings> read_search_engine_entry(const toml::table& table,
                                                          std::string_view source_name,
                                                          std::size_t index) {
  toml_entry r(table, "search_engines", source_name, index);
  search_engine_settings e;
  std::string type = std::string(to_string(e.type));
  auto ok = first_failure(r.text("name", e.name), r.text("type", type),
                          r.text("key_env", e.key_env), r.text("base_url", e.base_url),
                          r.boolean("enabled", e.enabled), r.boolean("default", e.is_default));
  if (ok) {
    ok = r.no_unknown_keys();
  }
  if (!ok) {
    return tl::unexpected(ok.error());
  }
  auto parsed = parse_search_engine_type(type);
  if (!parsed) {
    return fail(errc::invalid_argument,
                fmt::format("{}: [[search_engines]] entry {} ('{}'): {}", source_name, index + 1,
                            e.name, parsed.error().message));
  }
  e.type = *parsed;
  return e;
}

} // namespace detail

} // namespace troupe
