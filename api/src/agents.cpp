// The /api/v1 agents routes: list and read (user tokens), create, update and delete
// (admin tokens).

#include <set>

#include <fmt/format.h>

#include "json.hpp"
#include "state.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::api {

namespace {

void write_agent(json_writer& w, const storage::agent_record& a) {
  w.begin_object();
  w.key("id").value(a.uuid);
  w.key("name").value(a.name);
  w.key("system_prompt").value(a.system_prompt);
  if (a.provider_id) {
    w.key("provider_id").value(*a.provider_id);
  } else {
    w.key("provider_id").value(nullptr);
  }
  w.key("main_model").value(a.main_model);
  w.key("fast_model").value(a.fast_model);
  w.key("fallback_model").value(a.fallback_model);
  w.key("tools").raw(a.tools_json.empty() ? "[]" : a.tools_json);
  w.key("limits").raw(a.limits_json.empty() ? "{}" : a.limits_json);
  w.key("queue_policy").value(a.queue_policy);
  w.key("created_at").value(a.created_at);
  w.key("updated_at").value(a.updated_at);
  w.end_object();
}

const std::set<std::string_view> queue_policies = {"followup", "steer", "interrupt", "collect"};

// Applies the body's fields onto `a`; `creating` makes name and main_model required.
void read_agent_fields(json_body& body, storage::agent_record& a, bool creating) {
  if (auto v = body.text("name", creating, 200)) {
    if (v->empty()) {
      body.invalid("name", "must not be empty");
    }
    a.name = *v;
  }
  if (auto v = body.text("system_prompt", false, 256 * 1024)) {
    a.system_prompt = *v;
  }
  if (auto v = body.integer("provider_id", true)) {
    a.provider_id = *v;
  }
  if (auto v = body.text("main_model", creating, 200)) {
    if (v->empty()) {
      body.invalid("main_model", "must not be empty");
    }
    a.main_model = *v;
  }
  if (auto v = body.text("fast_model", false, 200)) {
    a.fast_model = *v;
  }
  if (auto v = body.text("fallback_model", false, 200)) {
    a.fallback_model = *v;
  }
  if (auto v = body.string_array("tools")) {
    a.tools_json = *v;
  }
  if (auto v = body.object("limits")) {
    // limits.web_search (issue 18) must name a mode: a typo would leave web access off
    // without a word.
    auto limits = json_object::parse(*v);
    if (limits) {
      auto mode = limits->text("web_search");
      if (!mode) {
        body.invalid("limits.web_search", "must be off, builtin or external");
      } else if (*mode && !parse_web_search_mode(**mode)) {
        body.invalid("limits.web_search", "must be off, builtin or external");
      }
    }
    a.limits_json = *v;
  }
  if (auto v = body.text("queue_policy")) {
    if (!queue_policies.contains(*v)) {
      body.invalid("queue_policy", "must be followup, steer, interrupt or collect");
    }
    a.queue_policy = *v;
  }
}

http_response check_agent_provider(const state_ptr& state, const storage::agent_record& a) {
  if (a.provider_id) {
    auto p = read(state, [&](auto& c) { return storage::find_provider(c, *a.provider_id); });
    if (!p) {
      return http_response::error(400, "invalid_argument", "provider_id: no such provider");
    }
  }
  return http_response{0, {}, {}, {}};
}

asio::awaitable<http_response> list_agents(state_ptr state, request_context& ctx) {
  storage::page p;
  if (auto bad = read_page(ctx.request(), p)) {
    co_return *bad;
  }
  auto answering = page_off_shard(
      state, p, [=](auto& c) { return storage::list_agents(c, p); },
      [=](auto& c) { return storage::count_agents(c); }, write_agent);
  auto answer = co_await std::move(answering);
  co_return answer;
}

asio::awaitable<http_response> get_agent(state_ptr state, request_context& ctx) {
  const std::string uuid(ctx.param("id"));
  auto a = read(state, [&](auto& c) { return storage::find_agent_by_uuid(c, uuid); });
  if (!a) {
    co_return not_found("agent");
  }
  co_return one_answer(200, *a, write_agent);
}

asio::awaitable<http_response> create_agent(state_ptr state, request_context& ctx) {
  json_body body(ctx.request().body);
  storage::agent_record a;
  read_agent_fields(body, a, true);
  if (!body.ok()) {
    co_return body.error_response();
  }
  if (auto bad = check_agent_provider(state, a); bad.status != 0) {
    co_return bad;
  }
  a.uuid = troupe::new_uuid();
  auto pending = store(state, "create agent", [a](auto& c) { return storage::insert_agent(c, a); });
  auto id = co_await std::move(pending);
  if (!id) {
    co_return error_response(id.error());
  }
  auto created = read(state, [&](auto& c) { return storage::find_agent(c, *id); });
  if (!created) {
    co_return error_response(created.error());
  }
  co_return one_answer(201, *created, write_agent);
}

asio::awaitable<http_response> update_agent(state_ptr state, request_context& ctx) {
  const std::string uuid(ctx.param("id"));
  auto a = read(state, [&](auto& c) { return storage::find_agent_by_uuid(c, uuid); });
  if (!a) {
    co_return not_found("agent");
  }
  json_body body(ctx.request().body);
  read_agent_fields(body, *a, false);
  if (!body.ok()) {
    co_return body.error_response();
  }
  if (auto bad = check_agent_provider(state, *a); bad.status != 0) {
    co_return bad;
  }
  auto pending =
      store(state, "update agent", [r = *a](auto& c) { return storage::update_agent(c, r); });
  auto done = co_await std::move(pending);
  if (!done) {
    co_return error_response(done.error());
  }
  auto updated = read(state, [&](auto& c) { return storage::find_agent(c, a->id); });
  if (!updated) {
    co_return error_response(updated.error());
  }
  co_return one_answer(200, *updated, write_agent);
}

asio::awaitable<http_response> delete_agent(state_ptr state, request_context& ctx) {
  const std::string uuid(ctx.param("id"));
  auto a = read(state, [&](auto& c) { return storage::find_agent_by_uuid(c, uuid); });
  if (!a) {
    co_return not_found("agent");
  }
  auto pending =
      store(state, "delete agent", [i = a->id](auto& c) { return storage::delete_agent(c, i); });
  auto done = co_await std::move(pending);
  if (!done) {
    if (done.error().code == errc::conflict) {
      co_return http_response::error(409, "conflict",
                                     "conversations still use this agent; it cannot be deleted");
    }
    co_return error_response(done.error());
  }
  co_return http_response{204, "application/json", {}, {}};
}

} // namespace

void add_agent_routes(route_table& routes) {
  using net::http_method;
  routes.add(http_method::get, "/api/v1/agents", api_access::user, &list_agents);
  routes.add(http_method::post, "/api/v1/agents", api_access::admin, &create_agent);
  routes.add(http_method::get, "/api/v1/agents/{id}", api_access::user, &get_agent);
  routes.add(http_method::patch, "/api/v1/agents/{id}", api_access::admin, &update_agent);
  routes.add(http_method::put, "/api/v1/agents/{id}", api_access::admin, &update_agent);
  routes.add(http_method::del, "/api/v1/agents/{id}", api_access::admin, &delete_agent);
}

} // namespace troupe::api
