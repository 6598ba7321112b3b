// The /api/v1 users routes: who am I (any token), list and create users (admin).

#include <fmt/format.h>

#include "json.hpp"
#include "state.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::api {

namespace {

void write_user(json_writer& w, const storage::user_record& u) {
  w.begin_object();
  w.key("id").value(u.id);
  w.key("name").value(u.name);
  w.key("display_name").value(u.display_name);
  w.key("role").value(u.role);
  w.key("created_at").value(u.created_at);
  w.end_object();
}

// --- me and users ---

asio::awaitable<http_response> get_me(state_ptr state, api_caller caller) {
  auto user = read(state, [&](auto& c) { return storage::find_user(c, caller.user_id); });
  if (!user) {
    co_return error_response(user.error());
  }
  json_writer w;
  w.begin_object();
  w.key("user");
  write_user(w, *user);
  w.key("token_id").value(caller.token_id);
  w.key("scope").value(caller.scope);
  if (caller.agent_id) {
    w.key("agent_id").value(*caller.agent_id);
  } else {
    w.key("agent_id").value(nullptr);
  }
  w.end_object();
  co_return http_response::json(200, std::move(w).str());
}

asio::awaitable<http_response> list_users(state_ptr state, request_context& ctx) {
  storage::page p;
  if (auto bad = read_page(ctx.request(), p)) {
    co_return *bad;
  }
  auto answering = page_off_shard(
      state, p, [=](auto& c) { return storage::list_users(c, p); },
      [=](auto& c) { return storage::count_users(c); }, write_user);
  auto answer = co_await std::move(answering);
  co_return answer;
}

asio::awaitable<http_response> create_user(state_ptr state, request_context& ctx) {
  json_body body(ctx.request().body);
  storage::user_record u;
  u.name = body.text("name", true, 200).value_or("");
  u.display_name = body.text("display_name", false, 200).value_or("");
  u.role = body.text("role").value_or("user");
  if (body.ok() && u.role != "admin" && u.role != "user") {
    body.invalid("role", "must be admin or user");
  }
  if (!body.ok()) {
    co_return body.error_response();
  }
  auto pending = store(state, "create user", [u](auto& c) { return storage::insert_user(c, u); });
  auto id = co_await std::move(pending);
  if (!id) {
    if (id.error().code == errc::conflict) {
      co_return http_response::error(409, "conflict", "name: a user with this name exists");
    }
    co_return error_response(id.error());
  }
  auto created = read(state, [&](auto& c) { return storage::find_user(c, *id); });
  if (!created) {
    co_return error_response(created.error());
  }
  co_return one_answer(201, *created, write_user);
}

} // namespace

void add_user_routes(route_table& routes) {
  using net::http_method;
  const auto& state = routes.state();
  routes.add(http_method::get, "/api/v1/me", api_access::chat,
             [state](request_context&, const api_caller& caller) { return get_me(state, caller); });
  routes.add(http_method::get, "/api/v1/users", api_access::admin, &list_users);
  routes.add(http_method::post, "/api/v1/users", api_access::admin, &create_user);
}

} // namespace troupe::api
