// The /api/v1 tokens routes: list, mint and revoke API tokens (a user's own; an admin's
// for anyone).

#include <fmt/format.h>

#include "json.hpp"
#include "state.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::api {

namespace {

void write_token(json_writer& w, const storage::api_token_record& t) {
  w.begin_object();
  w.key("id").value(t.id);
  w.key("user_id").value(t.user_id);
  w.key("name").value(t.name);
  w.key("scope").value(t.scope);
  if (t.agent_id) {
    w.key("agent_id").value(*t.agent_id);
  } else {
    w.key("agent_id").value(nullptr);
  }
  w.key("created_at").value(t.created_at);
  if (t.revoked_at) {
    w.key("revoked_at").value(*t.revoked_at);
  } else {
    w.key("revoked_at").value(nullptr);
  }
  w.end_object();
}

asio::awaitable<http_response> list_tokens(state_ptr state, request_context& ctx,
                                           api_caller caller) {
  storage::page p;
  if (auto bad = read_page(ctx.request(), p)) {
    co_return *bad;
  }
  std::optional<storage::row_id> user_id = caller.user_id;
  if (caller.is_admin()) {
    user_id.reset();
    if (const auto q = ctx.request().query_param("user_id"); !q.empty()) {
      user_id = parse_id(q);
      if (!user_id) {
        co_return http_response::error(400, "invalid_argument",
                                       "user_id: must be a positive integer");
      }
    }
  }
  auto answering = page_off_shard(
      state, p, [=](auto& c) { return storage::list_api_tokens(c, user_id, p); },
      [=](auto& c) { return storage::count_api_tokens(c, user_id); }, write_token);
  auto answer = co_await std::move(answering);
  co_return answer;
}

asio::awaitable<http_response> create_token(state_ptr state, request_context& ctx,
                                            api_caller caller) {
  json_body body(ctx.request().body);
  storage::api_token_record t;
  t.name = body.text("name", true, 200).value_or("");
  t.scope = body.text("scope").value_or("user");
  t.user_id = caller.user_id;
  if (auto user = body.integer("user_id")) {
    if (!caller.is_admin() && **user != caller.user_id) {
      body.invalid("user_id", "only an admin may create tokens for another user");
    }
    t.user_id = **user;
  }
  // The agent: its public id (as the agents routes show it), its name, or its row number.
  if (auto agent_element = body.element("agent_id"); agent_element && agent_element->is_string()) {
    const std::string key(agent_element->get_string().value_unsafe());
    auto agent = read(state, [&](auto& c) { return storage::find_agent_by_uuid(c, key); });
    if (!agent) {
      agent = read(state, [&](auto& c) { return storage::find_agent_by_name(c, key); });
    }
    if (agent) {
      t.agent_id = agent->id;
    } else {
      body.invalid("agent_id", "no such agent");
    }
  } else if (auto agent = body.integer("agent_id", true)) {
    t.agent_id = *agent;
  }
  if (body.ok()) {
    if (t.scope != "admin" && t.scope != "user" && t.scope != "agent") {
      body.invalid("scope", "must be admin, user or agent");
    } else if (t.scope == "admin" && !caller.is_admin()) {
      body.invalid("scope", "only an admin may create admin tokens");
    } else if (t.scope == "agent" && !t.agent_id) {
      body.invalid("agent_id", "is required for scope agent");
    } else if (t.scope != "agent" && t.agent_id) {
      body.invalid("agent_id", "is allowed only with scope agent");
    }
  }
  if (!body.ok()) {
    co_return body.error_response();
  }
  auto user = read(state, [&](auto& c) { return storage::find_user(c, t.user_id); });
  if (!user) {
    co_return http_response::error(400, "invalid_argument", "user_id: no such user");
  }
  if (t.scope == "admin" && user->role != "admin") {
    co_return http_response::error(400, "invalid_argument",
                                   "scope: admin tokens belong to admin users only");
  }
  if (t.agent_id) {
    auto agent = read(state, [&](auto& c) { return storage::find_agent(c, *t.agent_id); });
    if (!agent) {
      co_return http_response::error(400, "invalid_argument", "agent_id: no such agent");
    }
  }
  auto minted = mint_token();
  if (!minted) {
    co_return error_response(minted.error());
  }
  t.token_hash = minted->hash;
  auto pending =
      store(state, "create token", [t](auto& c) { return storage::insert_api_token(c, t); });
  auto id = co_await std::move(pending);
  if (!id) {
    co_return error_response(id.error());
  }
  auto created = read(state, [&](auto& c) { return storage::find_api_token_by_id(c, *id); });
  if (!created) {
    co_return error_response(created.error());
  }
  json_writer w;
  w.begin_object();
  w.key("token").value(minted->token);
  w.key("record");
  write_token(w, *created);
  w.end_object();
  co_return http_response::json(201, std::move(w).str());
}

asio::awaitable<http_response> revoke_token(state_ptr state, request_context& ctx,
                                            api_caller caller) {
  const auto id = parse_id(ctx.param("id"));
  if (!id) {
    co_return not_found("token");
  }
  auto token = read(state, [&](auto& c) { return storage::find_api_token_by_id(c, *id); });
  if (!token || (!caller.is_admin() && token->user_id != caller.user_id)) {
    co_return not_found("token");
  }
  auto pending =
      store(state, "revoke token", [i = *id](auto& c) { return storage::revoke_api_token(c, i); });
  auto done = co_await std::move(pending);
  if (!done && done.error().code != errc::not_found) {
    co_return error_response(done.error());
  }
  co_return http_response{204, "application/json", {}, {}};
}

} // namespace

void add_token_routes(route_table& routes) {
  using net::http_method;
  routes.add(http_method::get, "/api/v1/tokens", api_access::user, &list_tokens);
  routes.add(http_method::post, "/api/v1/tokens", api_access::user, &create_token);
  routes.add(http_method::del, "/api/v1/tokens/{id}", api_access::user, &revoke_token);
}

} // namespace troupe::api
