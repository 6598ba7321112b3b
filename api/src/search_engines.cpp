// The /api/v1/search_engines routes (issue 18): the engines web_search asks, listed and
// read with user tokens, created, changed, deleted and tested with admin tokens. A change
// is stored first, then the table's rows are handed to the node (the tools facade).
// Engines the config file declares are read-only here (they can still be tested).

#include <chrono>

#include <fmt/format.h>

#include "json.hpp"
#include "state.hpp"
#include "troupe/runtime/json_object.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/runtime/tool_config.hpp"
#include "troupe/storage/custom_tools.hpp"

namespace troupe::api {

namespace {

void write_engine(json_writer& w, const search_engine_settings& e) {
  write_search_engine(w, e);
}

http_response invalid(std::string_view message) {
  return http_response::error(400, "invalid_argument", message);
}

/// Hands the table's engines to the node (after a change).
void publish(const state_ptr& state) {
  if (!state->tools) {
    return;
  }
  auto rows = read(state, [](auto& c) { return storage::list_search_engine_settings(c); });
  if (rows) {
    state->tools->set_search_engines(std::move(*rows));
  }
}

asio::awaitable<http_response> list_engines(state_ptr state, request_context& ctx) {
  storage::page p;
  if (auto bad = read_page(ctx.request(), p)) {
    co_return *bad;
  }
  auto rows = read(state, [](auto& c) { return storage::list_search_engine_settings(c); });
  if (!rows) {
    co_return error_response(rows.error());
  }
  co_return page_of_all(*rows, p, write_engine);
}

expected<search_engine_settings> find(const state_ptr& state, const std::string& name) {
  return read(state, [&](auto& c) { return storage::find_search_engine(c, name); });
}

asio::awaitable<http_response> get_engine(state_ptr state, request_context& ctx) {
  auto e = find(state, std::string(ctx.param("name")));
  if (!e) {
    co_return e.error().code == errc::not_found ? not_found("search engine")
                                                : error_response(e.error());
  }
  co_return one_answer(200, *e, write_engine);
}

asio::awaitable<http_response> create_engine(state_ptr state, request_context& ctx) {
  auto object = json_object::parse(ctx.request().body);
  if (!object) {
    co_return invalid(object.error().message);
  }
  for (const auto* required : {"name", "type"}) {
    if (!object->has(required)) {
      co_return invalid(fmt::format("{}: is required", required));
    }
  }
  search_engine_settings e;
  if (auto ok = read_search_engine(*object, e); !ok) {
    co_return invalid(ok.error().message);
  }
  if (auto ok =
          validate_search_engine(e, state->key_env, fmt::format("search engine '{}'", e.name));
      !ok) {
    co_return invalid(ok.error().message);
  }
  auto pending = store(state, "create search engine", [e](auto& c) -> expected<std::int64_t> {
    if (auto ok = storage::insert_search_engine_settings(c, e); !ok) {
      return tl::unexpected(ok.error());
    }
    return 0;
  });
  auto done = co_await std::move(pending);
  if (!done) {
    co_return error_response(done.error());
  }
  publish(state);
  co_return one_answer(201, e, write_engine);
}

/// The search engine named in the path, unless the config declares it (409) or it is missing.
expected<search_engine_settings> editable(const state_ptr& state, request_context& ctx,
                                          std::optional<http_response>& refusal) {
  const std::string name(ctx.param("name"));
  auto e = find(state, name);
  if (auto refused = refusal_to_edit(e, "search engine")) {
    refusal = std::move(refused);
    return fail(errc::conflict, "not editable");
  }
  return e;
}

asio::awaitable<http_response> update_engine(state_ptr state, request_context& ctx) {
  std::optional<http_response> refusal;
  auto e = editable(state, ctx, refusal);
  if (!e) {
    co_return std::move(*refusal);
  }
  auto object = json_object::parse(ctx.request().body);
  if (!object) {
    co_return invalid(object.error().message);
  }
  const auto name = e->name;
  if (auto ok = read_search_engine(*object, *e); !ok) {
    co_return invalid(ok.error().message);
  }
  if (e->name != name) {
    co_return invalid("name: an engine keeps its name (delete it and create another)");
  }
  if (auto ok = validate_search_engine(*e, state->key_env, fmt::format("search engine '{}'", name));
      !ok) {
    co_return invalid(ok.error().message);
  }
  auto pending =
      store(state, "update search engine", [changed = *e](auto& c) -> expected<std::int64_t> {
        if (auto ok = storage::upsert_search_engine(c, changed); !ok) {
          return tl::unexpected(ok.error());
        }
        return 0;
      });
  auto done = co_await std::move(pending);
  if (!done) {
    co_return error_response(done.error());
  }
  publish(state);
  co_return one_answer(200, *e, write_engine);
}

asio::awaitable<http_response> delete_engine(state_ptr state, request_context& ctx) {
  std::optional<http_response> refusal;
  auto e = editable(state, ctx, refusal);
  if (!e) {
    co_return std::move(*refusal);
  }
  auto pending =
      store(state, "delete search engine", [name = e->name](auto& c) -> expected<std::int64_t> {
        auto gone = storage::delete_search_engine(c, name);
        if (!gone) {
          return tl::unexpected(gone.error());
        }
        return *gone ? 1 : 0;
      });
  auto done = co_await std::move(pending);
  if (!done) {
    co_return error_response(done.error());
  }
  publish(state);
  co_return http_response{204, "application/json", {}, {}};
}

// POST /api/v1/search_engines/{name}/test {"query": "…", "limit": N}: one search through
// this engine (enabled or not), answered 200 either way with what happened.
asio::awaitable<http_response> test_engine(state_ptr state, request_context& ctx) {
  auto e = find(state, std::string(ctx.param("name")));
  if (!e) {
    co_return e.error().code == errc::not_found ? not_found("search engine")
                                                : error_response(e.error());
  }
  json_body body(ctx.request().body.empty() ? std::string_view("{}") : ctx.request().body);
  body.only({"query", "limit"});
  auto query = body.text("query", false, 400);
  auto limit = body.integer("limit");
  if (!body.ok()) {
    co_return body.error_response();
  }
  const auto wanted = limit && *limit ? **limit : 3;
  if (wanted < 1 || wanted > 10) {
    co_return invalid("limit: must be 1 to 10");
  }
  if (!state->tools) {
    co_return http_response::error(503, "unavailable", "the node's tools are not running");
  }
  const auto started = std::chrono::steady_clock::now();
  auto searching = state->tools->test_search(*e, query && !query->empty() ? *query : "troupe",
                                             static_cast<unsigned>(wanted));
  auto results = co_await std::move(searching);
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  json_writer w;
  w.begin_object().key("engine").value(e->name).key("type").value(to_string(e->type));
  w.key("ok").value(results.has_value());
  if (results) {
    w.key("results").raw(*results);
  } else {
    w.key("error").value(results.error().message);
  }
  w.key("duration_ms").value(took.count()).end_object();
  co_return http_response::json(200, std::move(w).str());
}

} // namespace

void add_search_engine_routes(route_table& routes) {
  using net::http_method;
  routes.add(http_method::get, "/api/v1/search_engines", api_access::user, &list_engines);
  routes.add(http_method::post, "/api/v1/search_engines", api_access::admin, &create_engine);
  routes.add(http_method::get, "/api/v1/search_engines/{name}", api_access::user, &get_engine);
  routes.add(http_method::patch, "/api/v1/search_engines/{name}", api_access::admin,
             &update_engine);
  routes.add(http_method::del, "/api/v1/search_engines/{name}", api_access::admin, &delete_engine);
  routes.add(http_method::post, "/api/v1/search_engines/{name}/test", api_access::admin,
             &test_engine);
}

} // namespace troupe::api
