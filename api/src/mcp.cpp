// The node's MCP servers at run time (admin): `GET /api/v1/runtime/mcp` lists the set with
// each server's state and tools, `PUT /api/v1/runtime/mcp` replaces the whole set. The
// new set is stored (mcp_servers, secrets sealed) before the node applies it: unchanged
// servers keep their connection, removed ones are closed, new and changed ones connect.
// `env` and `headers` values are write-only: answers show "<redacted>".

#include <fmt/format.h>

#include "json.hpp"
#include "state.hpp"
#include "troupe/runtime/mcp_config.hpp"
#include "troupe/storage/mcp_servers.hpp"

namespace troupe::api {

namespace {

// The set with each server's state, as GET and PUT answer it.
std::string servers_json(const actors::mcp_facade& mcp) {
  const auto settings = mcp.settings();
  const auto states = mcp.status();
  json_writer w;
  w.begin_object().key("servers").begin_array();
  for (std::size_t k = 0; k < settings.size(); ++k) {
    // The server's fields, then its status in the same object.
    auto entry = mcp_server_json(settings[k], true);
    entry.pop_back(); // the closing brace
    w.raw(entry + ",\"status\":" + [&] {
      json_writer s;
      s.begin_object();
      if (k < states.size()) {
        const auto& st = states[k];
        s.key("state").value(st.state);
        if (!st.error.empty()) {
          s.key("error").value(st.error);
        }
        if (!st.protocol_version.empty()) {
          s.key("protocol_version").value(st.protocol_version);
          s.key("server").begin_object().key("name").value(st.server_name);
          s.key("version").value(st.server_version).end_object();
        }
        s.key("tools").begin_array();
        for (const auto& t : st.tools) {
          s.value(t);
        }
        s.end_array();
        s.key("restarts").value(st.restarts);
        s.key("calls_in_flight").value(st.calls_in_flight);
        s.key("calls_total").value(st.calls_total);
        if (st.pid != 0) {
          s.key("pid").value(static_cast<std::int64_t>(st.pid));
        }
      }
      s.end_object();
      return std::move(s).str();
    }() + "}");
  }
  w.end_array().end_object();
  return std::move(w).str();
}

asio::awaitable<http_response> get_mcp(state_ptr state, request_context&) {
  if (!state->mcp) {
    co_return http_response::error(503, "unavailable", "MCP servers are not managed by this node");
  }
  co_return http_response::json(200, servers_json(*state->mcp));
}

asio::awaitable<http_response> put_mcp(state_ptr state, request_context& ctx) {
  if (!state->mcp || !state->secrets) {
    co_return http_response::error(503, "unavailable", "MCP servers are not managed by this node");
  }
  auto servers = parse_mcp_servers_json(ctx.request().body);
  if (!servers) {
    co_return http_response::error(400, "invalid_argument", servers.error().message);
  }
  if (auto valid = validate_mcp_servers(*servers); !valid) {
    co_return http_response::error(400, "invalid_argument", valid.error().message);
  }
  // A redacted value sent back as it came is no value.
  for (const auto& s : *servers) {
    for (const auto* values : {&s.env, &s.headers}) {
      for (const auto& [k, v] : *values) {
        if (v == "<redacted>") {
          co_return http_response::error(
              400, "invalid_argument",
              fmt::format("MCP server '{}': {} is \"<redacted>\": send the value itself (GET "
                          "never shows it)",
                          s.name, k));
        }
      }
    }
    for (const auto& agent : s.agents) {
      auto found = read(
          state, [&](storage::connection& c) { return storage::find_agent_by_name(c, agent); });
      if (!found) {
        co_return http_response::error(
            400, "invalid_argument",
            fmt::format("MCP server '{}': agents: there is no agent '{}'", s.name, agent));
      }
    }
  }
  auto secrets = state->secrets;
  // Named, not a temporary of the co_await: GCC 12 destroys some of those twice.
  auto storing =
      store(state, "replace MCP servers", [servers = *servers, secrets](storage::connection& c) {
        return storage::replace_mcp_servers(c, servers, *secrets);
      });
  auto stored = co_await std::move(storing);
  if (!stored) {
    co_return error_response(stored.error());
  }
  state->mcp->apply(std::move(*servers));
  co_return http_response::json(200, servers_json(*state->mcp));
}

} // namespace

void add_mcp_routes(route_table& routes) {
  using net::http_method;
  routes.add(http_method::get, "/api/v1/runtime/mcp", api_access::admin, &get_mcp);
  routes.add(http_method::put, "/api/v1/runtime/mcp", api_access::admin, &put_mcp);
}

} // namespace troupe::api
