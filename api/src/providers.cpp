// The /api/v1 providers routes (admin tokens): CRUD, secrets write-only, and listing a
// provider's models through its client.

#include <fmt/format.h>

#include "json.hpp"
#include "state.hpp"
#include "troupe/net/http_client.hpp"
#include "troupe/net/provider_client.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/storage/catalog_sync.hpp"
#include "troupe/storage/provider_key.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::api {

namespace {

void write_provider(json_writer& w, const storage::provider_record& p) {
  w.begin_object();
  w.key("id").value(p.id);
  w.key("name").value(p.name);
  w.key("kind").value(p.kind);
  w.key("base_url").value(p.base_url);
  w.key("api_key_ref").value(p.api_key_ref);
  // Secrets are write-only: only whether one is set.
  w.key("has_api_key").value(!p.api_key.empty());
  w.key("config").raw(p.config_json.empty() ? "{}" : p.config_json);
  w.key("created_at").value(p.created_at);
  w.end_object();
}

void read_provider_fields(json_body& body, storage::provider_record& p, bool creating,
                          const api_state& state) {
  if (auto v = body.text("name", creating, 200)) {
    if (v->empty()) {
      body.invalid("name", "must not be empty");
    }
    p.name = *v;
  }
  if (auto v = body.text("kind", creating, 50)) {
    if (!net::parse_provider_type(*v)) {
      body.invalid("kind", "must be one of openai, openai-compatible, openrouter, qwen, kimi, "
                           "claude, anthropic");
    }
    p.kind = *v;
  }
  if (auto v = body.text("base_url", false, 2000)) {
    if (!v->empty() && !v->starts_with("http://") && !v->starts_with("https://")) {
      body.invalid("base_url", "must start with http:// or https://");
    }
    p.base_url = *v;
  }
  if (auto v = body.text("api_key_ref", false, 200)) {
    // The variable's value goes to base_url: an admin token must not name any variable.
    if (!state.key_env.allows(*v) && !v->empty()) {
      body.invalid("api_key_ref", fmt::format("'{}' is not allowed: {}", *v, key_env_rule()));
    }
    p.api_key_ref = *v;
  }
  if (auto v = body.text("api_key", false, 4096)) {
    // Sealed before it is stored; the plain key lives only in this request.
    if (v->empty()) {
      p.api_key.clear();
    } else if (!state.secrets) {
      body.invalid("api_key", "cannot be stored: this node has no secret key");
    } else if (auto sealed = state.secrets->seal(*v); !sealed) {
      body.invalid("api_key", "cannot be encrypted: " + sealed.error().message);
    } else {
      p.api_key = std::move(*sealed);
    }
  }
  if (auto v = body.object("config")) {
    p.config_json = *v;
  }
}

asio::awaitable<http_response> list_providers(state_ptr state, request_context& ctx) {
  storage::page p;
  if (auto bad = read_page(ctx.request(), p)) {
    co_return *bad;
  }
  auto answering = page_off_shard(
      state, p, [=](auto& c) { return storage::list_providers(c, p); },
      [=](auto& c) { return storage::count_providers(c); }, write_provider);
  auto answer = co_await std::move(answering);
  co_return answer;
}

std::optional<storage::provider_record> find_provider_param(const state_ptr& state,
                                                            request_context& ctx) {
  const auto id = parse_id(ctx.param("id"));
  if (!id) {
    return std::nullopt;
  }
  auto p = read(state, [&](auto& c) { return storage::find_provider(c, *id); });
  if (!p) {
    return std::nullopt;
  }
  return *p;
}

asio::awaitable<http_response> get_provider(state_ptr state, request_context& ctx) {
  auto p = find_provider_param(state, ctx);
  if (!p) {
    co_return not_found("provider");
  }
  co_return one_answer(200, *p, write_provider);
}

asio::awaitable<http_response> create_provider(state_ptr state, request_context& ctx) {
  json_body body(ctx.request().body);
  storage::provider_record p;
  read_provider_fields(body, p, true, *state);
  if (!body.ok()) {
    co_return body.error_response();
  }
  auto pending =
      store(state, "create provider", [p](auto& c) { return storage::insert_provider(c, p); });
  auto id = co_await std::move(pending);
  if (!id) {
    if (id.error().code == errc::conflict) {
      co_return http_response::error(409, "conflict", "name: a provider with this name exists");
    }
    co_return error_response(id.error());
  }
  auto created = read(state, [&](auto& c) { return storage::find_provider(c, *id); });
  if (!created) {
    co_return error_response(created.error());
  }
  co_return one_answer(201, *created, write_provider);
}

asio::awaitable<http_response> update_provider(state_ptr state, request_context& ctx) {
  auto p = find_provider_param(state, ctx);
  if (!p) {
    co_return not_found("provider");
  }
  json_body body(ctx.request().body);
  read_provider_fields(body, *p, false, *state);
  if (!body.ok()) {
    co_return body.error_response();
  }
  auto pending =
      store(state, "update provider", [r = *p](auto& c) { return storage::update_provider(c, r); });
  auto done = co_await std::move(pending);
  if (!done) {
    if (done.error().code == errc::conflict) {
      co_return http_response::error(409, "conflict", "name: a provider with this name exists");
    }
    co_return error_response(done.error());
  }
  co_return one_answer(200, *p, write_provider);
}

asio::awaitable<http_response> delete_provider(state_ptr state, request_context& ctx) {
  auto p = find_provider_param(state, ctx);
  if (!p) {
    co_return not_found("provider");
  }
  auto pending = store(state, "delete provider",
                       [i = p->id](auto& c) { return storage::delete_provider(c, i); });
  auto done = co_await std::move(pending);
  if (!done) {
    co_return error_response(done.error());
  }
  co_return http_response{204, "application/json", {}, {}};
}

asio::awaitable<http_response> provider_models(state_ptr state, request_context& ctx) {
  auto p = find_provider_param(state, ctx);
  if (!p) {
    co_return not_found("provider");
  }
  auto type = net::parse_provider_type(p->kind);
  if (!type) {
    co_return http_response::error(409, "conflict",
                                   "kind: '" + p->kind + "' has no client to list models");
  }
  net::provider_config config;
  config.type = *type;
  config.base_url = p->base_url;
  auto key = storage::provider_api_key(*p, state->declared_providers, environment_snapshot(),
                                       state->key_env, state->secrets.get());
  if (!key) {
    co_return http_response::error(409, "conflict", key.error().message);
  }
  config.api_key = std::move(*key);
  config.retry.max_attempts = 1;
  // One client for this request: listing models is a rare admin call.
  net::http_client http(ctx.executor());
  net::provider_client client(http, config);
  auto pending = client.list_models();
  auto models = co_await std::move(pending);
  if (!models) {
    co_return http_response::error(
        502, "upstream_error", "the provider did not list its models: " + models.error().message);
  }
  json_writer w;
  w.begin_object();
  w.key("data").begin_array();
  for (const auto& id : *models) {
    w.begin_object();
    w.key("id").value(id);
    w.end_object();
  }
  w.end_array();
  w.key("total").value(static_cast<std::int64_t>(models->size()));
  w.end_object();
  co_return http_response::json(200, std::move(w).str());
}

} // namespace

void add_provider_routes(route_table& routes) {
  using net::http_method;
  routes.add(http_method::get, "/api/v1/providers", api_access::admin, &list_providers);
  routes.add(http_method::post, "/api/v1/providers", api_access::admin, &create_provider);
  routes.add(http_method::get, "/api/v1/providers/{id}", api_access::admin, &get_provider);
  routes.add(http_method::patch, "/api/v1/providers/{id}", api_access::admin, &update_provider);
  routes.add(http_method::put, "/api/v1/providers/{id}", api_access::admin, &update_provider);
  routes.add(http_method::del, "/api/v1/providers/{id}", api_access::admin, &delete_provider);
  routes.add(http_method::get, "/api/v1/providers/{id}/models", api_access::admin,
             &provider_models);
}

} // namespace troupe::api
