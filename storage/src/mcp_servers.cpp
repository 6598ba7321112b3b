#include "troupe/storage/mcp_servers.hpp"

#include <chrono>

#include <fmt/format.h>
#include <simdjson.h>

#include "troupe/runtime/json_writer.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::storage {

namespace {

void write_map(json_writer& w, const std::map<std::string, std::string>& values) {
  w.begin_object();
  for (const auto& [k, v] : values) {
    w.key(k).value(v);
  }
  w.end_object();
}

void write_list(json_writer& w, const std::vector<std::string>& values) {
  w.begin_array();
  for (const auto& v : values) {
    w.value(v);
  }
  w.end_array();
}

expected<mcp_server_record> to_record(const mcp_server_settings& s, const secret_box& box) {
  json_writer secrets;
  secrets.begin_object().key("env");
  write_map(secrets, s.env);
  secrets.key("headers");
  write_map(secrets, s.headers);
  secrets.end_object();
  auto sealed = box.seal(secrets.str());
  if (!sealed) {
    return tl::unexpected(sealed.error());
  }
  json_writer w;
  w.begin_object().key("args");
  write_list(w, s.args);
  w.key("agents");
  write_list(w, s.agents);
  w.key("elicitation").value(s.elicitation).key("timeout_s").value(s.timeout_s);
  w.key("secrets").value(*sealed).end_object();
  mcp_server_record r;
  r.name = s.name;
  r.transport = std::string(s.transport());
  r.endpoint = s.url.empty() ? s.command : s.url;
  r.config_json = std::move(w).str();
  r.enabled = s.enabled;
  r.created_at = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  return r;
}

std::vector<std::string> read_list(simdjson::dom::element e) {
  std::vector<std::string> out;
  simdjson::dom::array array;
  if (e.get_array().get(array) == simdjson::SUCCESS) {
    for (auto item : array) {
      std::string_view s;
      if (item.get_string().get(s) == simdjson::SUCCESS) {
        out.emplace_back(s);
      }
    }
  }
  return out;
}

std::map<std::string, std::string> read_map(simdjson::dom::element e) {
  std::map<std::string, std::string> out;
  simdjson::dom::object object;
  if (e.get_object().get(object) == simdjson::SUCCESS) {
    for (auto [k, v] : object) {
      std::string_view s;
      if (v.get_string().get(s) == simdjson::SUCCESS) {
        out[std::string(k)] = std::string(s);
      }
    }
  }
  return out;
}

expected<mcp_server_settings> from_record(const mcp_server_record& r, const secret_box& box) {
  mcp_server_settings s;
  s.name = r.name;
  if (r.transport == "http") {
    s.url = r.endpoint;
  } else {
    s.command = r.endpoint;
  }
  s.enabled = r.enabled;
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(r.config_json);
  simdjson::dom::element config;
  if (parser.parse(padded).get(config) != simdjson::SUCCESS || !config.is_object()) {
    return fail(errc::parse_error,
                fmt::format("MCP server '{}': its stored config is not JSON", r.name));
  }
  simdjson::dom::element field;
  if (config["args"].get(field) == simdjson::SUCCESS) {
    s.args = read_list(field);
  }
  if (config["agents"].get(field) == simdjson::SUCCESS) {
    s.agents = read_list(field);
  }
  std::string_view text;
  if (config["elicitation"].get_string().get(text) == simdjson::SUCCESS) {
    s.elicitation = std::string(text);
  }
  std::uint64_t timeout = 0;
  if (config["timeout_s"].get_uint64().get(timeout) == simdjson::SUCCESS) {
    s.timeout_s = static_cast<std::uint32_t>(timeout);
  }
  if (config["secrets"].get_string().get(text) == simdjson::SUCCESS && !text.empty()) {
    auto opened = box.open(text);
    if (!opened) {
      return fail(opened.error().code, fmt::format("MCP server '{}': its env and headers: {}",
                                                   r.name, opened.error().message));
    }
    simdjson::dom::parser inner;
    const simdjson::padded_string secret_text(*opened);
    simdjson::dom::element secrets;
    if (inner.parse(secret_text).get(secrets) == simdjson::SUCCESS) {
      if (secrets["env"].get(field) == simdjson::SUCCESS) {
        s.env = read_map(field);
      }
      if (secrets["headers"].get(field) == simdjson::SUCCESS) {
        s.headers = read_map(field);
      }
    }
  }
  return s;
}

} // namespace

expected<std::vector<mcp_server_settings>> load_mcp_servers(connection& c, const secret_box& box) {
  auto rows = list_mcp_servers(c);
  if (!rows) {
    return tl::unexpected(rows.error());
  }
  std::vector<mcp_server_settings> out;
  for (const auto& r : *rows) {
    auto s = from_record(r, box);
    if (!s) {
      return tl::unexpected(s.error());
    }
    out.push_back(std::move(*s));
  }
  return out;
}

expected<void> replace_mcp_servers(connection& c, const std::vector<mcp_server_settings>& servers,
                                   const secret_box& box) {
  if (auto ok = c.run("DELETE FROM mcp_servers"); !ok) {
    return ok;
  }
  for (const auto& s : servers) {
    auto r = to_record(s, box);
    if (!r) {
      return tl::unexpected(r.error());
    }
    if (auto id = insert_mcp_server(c, std::move(*r)); !id) {
      return tl::unexpected(id.error());
    }
  }
  return {};
}

expected<std::size_t> sync_declared_mcp_servers(connection& c,
                                                const std::vector<mcp_server_settings>& servers,
                                                const secret_box& box) {
  return in_transaction(c, [&](connection& conn) -> expected<std::size_t> {
    for (const auto& s : servers) {
      auto r = to_record(s, box);
      if (!r) {
        return tl::unexpected(r.error());
      }
      if (auto ok = conn.run("UPDATE mcp_servers SET transport = ?, endpoint = ?, config_json = ?, "
                             "enabled = ? WHERE name = ?",
                             r->transport, r->endpoint, r->config_json, r->enabled, r->name);
          !ok) {
        return tl::unexpected(ok.error());
      }
      if (conn.changes() == 0) {
        if (auto id = insert_mcp_server(conn, std::move(*r)); !id) {
          return tl::unexpected(id.error());
        }
      }
    }
    return servers.size();
  });
}

} // namespace troupe::storage
