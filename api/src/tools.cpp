// The /api/v1/tools routes (issue 18): custom tools, listed and read with user tokens,
// created, changed and deleted with admin tokens. A change is stored first, then handed to
// the node's tool set (the tools facade): the next run sees it, a running run keeps the
// set it started with. Tools the config file declares are read-only here.

#include <fmt/format.h>

#include "json.hpp"
#include "state.hpp"
#include "troupe/runtime/json_object.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/runtime/tool_config.hpp"
#include "troupe/storage/custom_tools.hpp"

namespace troupe::api {

namespace {

void write_tool(json_writer& w, const custom_tool_settings& t) {
  write_custom_tool(w, t);
}

http_response invalid(std::string_view message) {
  return http_response::error(400, "invalid_argument", message);
}

/// Checks a tool as the node would take it; the 400 (or 409) answer when it would not.
std::optional<http_response> refusal_of(const state_ptr& state, const custom_tool_settings& t) {
  if (auto ok = validate_custom_tool(t, state->key_env, fmt::format("tool '{}'", t.name)); !ok) {
    return invalid(ok.error().message);
  }
  for (const auto& agent : t.agents) {
    auto found = state->catalog
                     ? state->catalog->agent_by_name_or_uuid(agent)
                     : read(state, [&](auto& c) { return storage::find_agent_by_name(c, agent); });
    if (!found) {
      return invalid(fmt::format("tool '{}': agents: no agent is named '{}'", t.name, agent));
    }
  }
  if (state->tools) {
    if (auto ok = state->tools->check_tool(t); !ok) {
      return ok.error().code == errc::conflict
                 ? http_response::error(409, "conflict", ok.error().message)
                 : invalid(ok.error().message);
    }
  }
  return std::nullopt;
}

/// The body as an object, or the 400 answer.
expected<json_object> body_object(const net::http_request& request) {
  return json_object::parse(request.body);
}

asio::awaitable<http_response> list_tools(state_ptr state, request_context& ctx) {
  storage::page p;
  if (auto bad = read_page(ctx.request(), p)) {
    co_return *bad;
  }
  auto rows = read(state, [](auto& c) { return storage::list_custom_tools(c); });
  if (!rows) {
    co_return error_response(rows.error());
  }
  co_return page_of_all(*rows, p, write_tool);
}

asio::awaitable<http_response> get_tool(state_ptr state, request_context& ctx) {
  const std::string name(ctx.param("name"));
  auto t = read(state, [&](auto& c) { return storage::find_custom_tool(c, name); });
  if (!t) {
    co_return t.error().code == errc::not_found ? not_found("tool") : error_response(t.error());
  }
  co_return one_answer(200, *t, write_tool);
}

asio::awaitable<http_response> create_tool(state_ptr state, request_context& ctx) {
  auto object = body_object(ctx.request());
  if (!object) {
    co_return invalid(object.error().message);
  }
  if (!object->has("name")) {
    co_return invalid("name: is required");
  }
  custom_tool_settings t;
  if (auto ok = read_custom_tool(*object, t); !ok) {
    co_return invalid(ok.error().message);
  }
  if (auto refused = refusal_of(state, t)) {
    co_return std::move(*refused);
  }
  auto pending = store(state, "create tool", [t](auto& c) -> expected<std::int64_t> {
    if (auto ok = storage::insert_custom_tool(c, t); !ok) {
      return tl::unexpected(ok.error());
    }
    return 0;
  });
  auto done = co_await std::move(pending);
  if (!done) {
    co_return error_response(done.error());
  }
  if (state->tools) {
    if (auto installed = state->tools->install_tool(t); !installed) {
      co_return error_response(installed.error());
    }
  }
  co_return one_answer(201, t, write_tool);
}

/// The tool named in the path, unless the config declares it (409) or it is missing.
expected<custom_tool_settings> editable(const state_ptr& state, request_context& ctx,
                                        std::optional<http_response>& refusal) {
  const std::string name(ctx.param("name"));
  auto t = read(state, [&](auto& c) { return storage::find_custom_tool(c, name); });
  if (auto refused = refusal_to_edit(t, "tool")) {
    refusal = std::move(refused);
    return fail(errc::conflict, "not editable");
  }
  return t;
}

asio::awaitable<http_response> update_tool(state_ptr state, request_context& ctx) {
  std::optional<http_response> refusal;
  auto t = editable(state, ctx, refusal);
  if (!t) {
    co_return std::move(*refusal);
  }
  auto object = body_object(ctx.request());
  if (!object) {
    co_return invalid(object.error().message);
  }
  const auto name = t->name;
  if (auto ok = read_custom_tool(*object, *t); !ok) {
    co_return invalid(ok.error().message);
  }
  if (t->name != name) {
    co_return invalid("name: a tool keeps its name (delete it and create another)");
  }
  if (auto refused = refusal_of(state, *t)) {
    co_return std::move(*refused);
  }
  auto pending = store(state, "update tool", [changed = *t](auto& c) -> expected<std::int64_t> {
    if (auto ok = storage::upsert_custom_tool(c, changed); !ok) {
      return tl::unexpected(ok.error());
    }
    return 0;
  });
  auto done = co_await std::move(pending);
  if (!done) {
    co_return error_response(done.error());
  }
  if (state->tools) {
    if (auto installed = state->tools->install_tool(*t); !installed) {
      co_return error_response(installed.error());
    }
  }
  co_return one_answer(200, *t, write_tool);
}

asio::awaitable<http_response> delete_tool(state_ptr state, request_context& ctx) {
  std::optional<http_response> refusal;
  auto t = editable(state, ctx, refusal);
  if (!t) {
    co_return std::move(*refusal);
  }
  auto pending = store(state, "delete tool", [name = t->name](auto& c) -> expected<std::int64_t> {
    auto gone = storage::delete_custom_tool(c, name);
    if (!gone) {
      return tl::unexpected(gone.error());
    }
    return *gone ? 1 : 0;
  });
  auto done = co_await std::move(pending);
  if (!done) {
    co_return error_response(done.error());
  }
  if (state->tools) {
    state->tools->remove_tool(t->name);
  }
  co_return http_response{204, "application/json", {}, {}};
}

} // namespace

void add_tool_routes(route_table& routes) {
  using net::http_method;
  routes.add(http_method::get, "/api/v1/tools", api_access::user, &list_tools);
  routes.add(http_method::post, "/api/v1/tools", api_access::admin, &create_tool);
  routes.add(http_method::get, "/api/v1/tools/{name}", api_access::user, &get_tool);
  routes.add(http_method::patch, "/api/v1/tools/{name}", api_access::admin, &update_tool);
  routes.add(http_method::del, "/api/v1/tools/{name}", api_access::admin, &delete_tool);
}

} // namespace troupe::api
