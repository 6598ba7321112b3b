#include "troupe/runtime/mcp_config.hpp"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>
#include <simdjson.h>

#include "mcp_toml.hpp"
#include "toml_entry.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe {

namespace {

constexpr std::size_t max_server_name = 32;
constexpr std::uint32_t max_timeout_s = 86'400;
constexpr std::string_view redacted = "<redacted>";

bool valid_env_name(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front())) != 0) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  });
}

// An HTTP token (RFC 9110): what a header name may be made of.
bool valid_header_name(std::string_view name) {
  static constexpr std::string_view extra = "!#$%&'*+-.^_`|~";
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
           extra.find(c) != std::string_view::npos;
  });
}

void write_map(json_writer& w, const std::map<std::string, std::string>& values, bool redact) {
  w.begin_object();
  for (const auto& [k, v] : values) {
    w.key(k).value(redact ? redacted : std::string_view(v));
  }
  w.end_object();
}

// --- JSON reading ---

using simdjson::dom::element;

expected<std::string> json_text(element e, const std::string& where) {
  std::string_view s;
  if (e.get_string().get(s) != simdjson::SUCCESS) {
    return fail(errc::invalid_argument, fmt::format("{}: must be a string", where));
  }
  return std::string(s);
}

expected<std::vector<std::string>> json_text_list(element e, const std::string& where) {
  simdjson::dom::array array;
  if (e.get_array().get(array) != simdjson::SUCCESS) {
    return fail(errc::invalid_argument, fmt::format("{}: must be an array of strings", where));
  }
  std::vector<std::string> out;
  for (auto item : array) {
    std::string_view s;
    if (item.get_string().get(s) != simdjson::SUCCESS) {
      return fail(errc::invalid_argument, fmt::format("{}: must be an array of strings", where));
    }
    out.emplace_back(s);
  }
  return out;
}

expected<std::map<std::string, std::string>> json_text_map(element e, const std::string& where) {
  simdjson::dom::object object;
  if (e.get_object().get(object) != simdjson::SUCCESS) {
    return fail(errc::invalid_argument,
                fmt::format("{}: must be an object of string values", where));
  }
  std::map<std::string, std::string> out;
  for (auto [k, v] : object) {
    std::string_view s;
    if (v.get_string().get(s) != simdjson::SUCCESS) {
      return fail(errc::invalid_argument, fmt::format("{}.{}: must be a string", where, k));
    }
    out[std::string(k)] = std::string(s);
  }
  return out;
}

expected<mcp_server_settings> read_json_server(element e, const std::string& where) {
  simdjson::dom::object object;
  if (e.get_object().get(object) != simdjson::SUCCESS) {
    return fail(errc::invalid_argument, fmt::format("{}: must be an object", where));
  }
  mcp_server_settings s;
  for (auto [raw_key, value] : object) {
    const std::string key(raw_key);
    const auto at = where + "." + key;
    expected<void> ok;
    auto assign = [&ok](auto read, auto& into) {
      if (!read) {
        ok = tl::unexpected(read.error());
      } else {
        into = std::move(*read);
      }
    };
    if (key == "name") {
      assign(json_text(value, at), s.name);
    } else if (key == "command") {
      assign(json_text(value, at), s.command);
    } else if (key == "args") {
      assign(json_text_list(value, at), s.args);
    } else if (key == "env") {
      assign(json_text_map(value, at), s.env);
    } else if (key == "url") {
      assign(json_text(value, at), s.url);
    } else if (key == "headers") {
      assign(json_text_map(value, at), s.headers);
    } else if (key == "agents") {
      assign(json_text_list(value, at), s.agents);
    } else if (key == "elicitation") {
      assign(json_text(value, at), s.elicitation);
    } else if (key == "timeout_s") {
      std::uint64_t n = 0;
      if (value.get_uint64().get(n) != simdjson::SUCCESS || n > max_timeout_s) {
        ok = fail(errc::invalid_argument,
                  fmt::format("{}: must be a whole number from 1 to {}", at, max_timeout_s));
      } else {
        s.timeout_s = static_cast<std::uint32_t>(n);
      }
    } else if (key == "enabled") {
      bool flag = true;
      if (value.get_bool().get(flag) != simdjson::SUCCESS) {
        ok = fail(errc::invalid_argument, fmt::format("{}: must be true or false", at));
      } else {
        s.enabled = flag;
      }
    } else if (key == "status" || key == "transport") {
      // What GET adds to each server; a GET body may be sent back as it is.
    } else {
      ok = fail(errc::invalid_argument, fmt::format("{}: unknown field", at));
    }
    if (!ok) {
      return tl::unexpected(ok.error());
    }
  }
  return s;
}

// --- TOML reading ---

} // namespace

expected<void> validate_mcp_server(const mcp_server_settings& s) {
  const auto bad = [&](std::string what) {
    return fail(errc::invalid_argument,
                fmt::format("MCP server '{}': {}", s.name, std::move(what)));
  };
  if (s.name.empty() || s.name.size() > max_server_name ||
      !std::all_of(s.name.begin(), s.name.end(),
                   [](char c) {
                     return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' ||
                            c == '_';
                   }) ||
      s.name.find(mcp_tool_separator) != std::string::npos) {
    return bad(fmt::format("name must be 1 to {} letters, digits, '-' or '_', without \"{}\"",
                           max_server_name, mcp_tool_separator));
  }
  if (s.command.empty() == s.url.empty()) {
    return bad("give exactly one of command (stdio) and url (Streamable HTTP)");
  }
  if (!s.url.empty()) {
    if (!s.url.starts_with("http://") && !s.url.starts_with("https://")) {
      return bad("url must start with http:// or https://");
    }
    if (!s.args.empty() || !s.env.empty()) {
      return bad("args and env are for a command (stdio), not a url");
    }
  } else if (!s.headers.empty()) {
    return bad("headers are for a url (Streamable HTTP), not a command");
  }
  for (const auto& [k, v] : s.env) {
    if (!valid_env_name(k)) {
      return bad(fmt::format("env: '{}' is not a variable name", k));
    }
    if (v.find('\0') != std::string::npos) {
      return bad(fmt::format("env.{}: holds a NUL byte", k));
    }
  }
  for (const auto& [k, v] : s.headers) {
    if (!valid_header_name(k)) {
      return bad(fmt::format("headers: '{}' is not a header name", k));
    }
    if (v.find_first_of("\r\n") != std::string::npos) {
      return bad(fmt::format("headers.{}: holds a line break", k));
    }
  }
  if (s.elicitation != "decline" && s.elicitation != "defaults") {
    return bad(fmt::format("elicitation must be decline or defaults, not '{}'", s.elicitation));
  }
  if (s.timeout_s < 1 || s.timeout_s > max_timeout_s) {
    return bad(fmt::format("timeout_s must be from 1 to {}", max_timeout_s));
  }
  return {};
}

expected<void> validate_mcp_servers(const std::vector<mcp_server_settings>& servers) {
  std::set<std::string, std::less<>> names;
  for (const auto& s : servers) {
    if (auto ok = validate_mcp_server(s); !ok) {
      return ok;
    }
    if (!names.insert(s.name).second) {
      return fail(errc::invalid_argument, fmt::format("MCP server '{}' is declared twice", s.name));
    }
  }
  return {};
}

std::string mcp_server_json(const mcp_server_settings& s, bool redact) {
  json_writer w;
  w.begin_object().key("name").value(s.name).key("transport").value(s.transport());
  if (s.url.empty()) {
    w.key("command").value(s.command).key("args").begin_array();
    for (const auto& a : s.args) {
      w.value(a);
    }
    w.end_array().key("env");
    write_map(w, s.env, redact);
  } else {
    w.key("url").value(s.url).key("headers");
    write_map(w, s.headers, redact);
  }
  w.key("agents").begin_array();
  for (const auto& a : s.agents) {
    w.value(a);
  }
  w.end_array();
  w.key("elicitation").value(s.elicitation).key("timeout_s").value(s.timeout_s);
  w.key("enabled").value(s.enabled).end_object();
  return std::move(w).str();
}

std::string mcp_servers_json(const std::vector<mcp_server_settings>& servers, bool redact) {
  json_writer w;
  w.begin_object().key("servers").begin_array();
  for (const auto& s : servers) {
    w.raw(mcp_server_json(s, redact));
  }
  w.end_array().end_object();
  return std::move(w).str();
}

expected<std::vector<mcp_server_settings>> parse_mcp_servers_json(std::string_view json) {
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(json);
  element root;
  if (parser.parse(padded).get(root) != simdjson::SUCCESS) {
    return fail(errc::invalid_argument, "the body is not JSON");
  }
  simdjson::dom::array list;
  if (root.get_array().get(list) != simdjson::SUCCESS) {
    simdjson::dom::object object;
    if (root.get_object().get(object) != simdjson::SUCCESS ||
        root["servers"].get_array().get(list) != simdjson::SUCCESS) {
      return fail(errc::invalid_argument, "servers: is required (an array of MCP servers)");
    }
    for (auto [key, value] : object) {
      (void)value;
      if (key != "servers") {
        return fail(errc::invalid_argument, fmt::format("{}: unknown field", key));
      }
    }
  }
  std::vector<mcp_server_settings> out;
  std::size_t index = 0;
  for (auto item : list) {
    auto server = read_json_server(item, fmt::format("servers[{}]", index));
    if (!server) {
      return tl::unexpected(server.error());
    }
    out.push_back(std::move(*server));
    ++index;
  }
  return out;
}

std::string mcp_servers_toml(const std::vector<mcp_server_settings>& servers) {
  std::string out;
  const auto list = detail::toml_string_list;
  const auto names = [](const std::map<std::string, std::string>& values) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : values) {
      keys.push_back(k);
    }
    return keys;
  };
  for (const auto& s : servers) {
    out += fmt::format("\n[[mcp_servers]]\nname = {}\n", detail::toml_string(s.name));
    if (s.url.empty()) {
      out += fmt::format("command = {}\nargs = {}\n", detail::toml_string(s.command), list(s.args));
      if (!s.env.empty()) {
        out += fmt::format("# env is set (not printed): {}\n", fmt::join(names(s.env), ", "));
      }
    } else {
      out += fmt::format("url = {}\n", detail::toml_string(s.url));
      if (!s.headers.empty()) {
        out +=
            fmt::format("# headers are set (not printed): {}\n", fmt::join(names(s.headers), ", "));
      }
    }
    out += fmt::format("agents = {}\nelicitation = {}\ntimeout_s = {}\nenabled = {}\n",
                       list(s.agents), detail::toml_string(s.elicitation), s.timeout_s, s.enabled);
  }
  return out;
}

namespace detail {

expected<void> read_mcp_servers(std::vector<mcp_server_settings>& into, const toml::array& array,
                                std::string_view source_name) {
  for (std::size_t i = 0; i < array.size(); ++i) {
    const auto* table = array[i].as_table();
    if (table == nullptr) {
      return fail(errc::invalid_argument,
                  fmt::format("{}: 'mcp_servers' must be an array of tables ([[mcp_servers]])",
                              source_name));
    }
    toml_entry r(*table, "mcp_servers", source_name, i);
    mcp_server_settings s;
    expected<void> ok;
    for (auto step :
         {r.text("name", s.name), r.text("command", s.command), r.text_list("args", s.args),
          r.text_map("env", s.env), r.text("url", s.url), r.text_map("headers", s.headers),
          r.text_list("agents", s.agents), r.text("elicitation", s.elicitation),
          r.number("timeout_s", s.timeout_s, 1, max_timeout_s), r.boolean("enabled", s.enabled)}) {
      if (ok && !step) {
        ok = step;
      }
    }
    if (ok) {
      ok = r.no_unknown_keys();
    }
    if (ok) {
      ok = validate_mcp_server(s);
      if (!ok) {
        ok = fail(errc::invalid_argument, fmt::format("{}: {}", source_name, ok.error().message));
      }
    }
    if (!ok) {
      return ok;
    }
    into.push_back(std::move(s));
  }
  return {};
}

} // namespace detail

} // namespace troupe
