// The /api/v1 resource routes: me, users, tokens, agents, providers, conversations.
// Files are in api_files.cpp. Every route is wrapped by `guard` (api_auth.cpp).

#include "troupe/actors/api_routes.hpp"

#include <charconv>
#include <cstdlib>
#include <map>
#include <set>

#include <fmt/format.h>

#include "api_json.hpp"
#include "troupe/net/http_client.hpp"
#include "troupe/net/provider_client.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/storage/repositories.hpp"
#include "troupe/storage/write_op.hpp"

namespace troupe::actors {

// Declared here, defined in api_files.cpp and api_chat.cpp.
void add_file_routes(net::router& routes, std::shared_ptr<api_state> state,
                     std::set<std::string>& preflighted);
void add_chat_routes(net::router& routes, std::shared_ptr<api_state> state,
                     std::set<std::string>& preflighted);

namespace {

namespace asio = boost::asio;
using detail::error_response;
using detail::json_body;
using net::http_response;
using net::request_context;

constexpr auto write_timeout = std::chrono::seconds(10);

using state_ptr = std::shared_ptr<api_state>;

// Reads on the pool; `f(connection&)` returns an expected.
template <class F> auto read(const state_ptr& state, F f) {
  return state->reads->with(std::move(f));
}

// Starts one write through the store_writer. A plain function, and its result awaited as
// a named value: GCC 12 destroys some temporaries of a co_await full-expression twice.
template <class F>
asio::awaitable<write_result> store(const state_ptr& state, std::string what, F f) {
  return write(*state->system, state->writer, storage::make_write(std::move(what), std::move(f)),
               write_timeout);
}

std::optional<storage::row_id> parse_id(std::string_view text) {
  storage::row_id v = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc{} || ptr != end || text.empty() || v <= 0) {
    return std::nullopt;
  }
  return v;
}

http_response not_found(std::string_view what) {
  return http_response::error(404, "not_found", fmt::format("no such {}", what));
}

// `{"data":[…],"total":N,"limit":L,"offset":O}`
template <class Record, class Write>
http_response page_answer(const std::vector<Record>& rows, std::int64_t total, storage::page p,
                          Write write_one) {
  json_writer w;
  w.begin_object();
  w.key("data").begin_array();
  for (const auto& r : rows) {
    write_one(w, r);
  }
  w.end_array();
  w.key("total").value(total);
  w.key("limit").value(p.limit);
  w.key("offset").value(p.offset);
  w.end_object();
  return http_response::json(200, std::move(w).str());
}

template <class Record, class Write>
http_response one_answer(unsigned status, const Record& r, Write write_one) {
  json_writer w;
  write_one(w, r);
  return http_response::json(status, std::move(w).str());
}

void write_user(json_writer& w, const storage::user_record& u) {
  w.begin_object();
  w.key("id").value(u.id);
  w.key("name").value(u.name);
  w.key("display_name").value(u.display_name);
  w.key("role").value(u.role);
  w.key("created_at").value(u.created_at);
  w.end_object();
}

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

void write_conversation(json_writer& w, const storage::conversation_record& c) {
  w.begin_object();
  w.key("id").value(c.uuid);
  w.key("agent_id").value(c.agent_id);
  w.key("title").value(c.title);
  w.key("archived").value(c.archived);
  w.key("created_at").value(c.created_at);
  w.key("updated_at").value(c.updated_at);
  w.end_object();
}

/// What a message list shows of each run: its public id and, when asked, its steps.
struct run_view {
  std::string uuid;
  std::vector<storage::execution_step_record> steps;
  /// The id of the run's final answer (its last assistant message without tool calls).
  std::int64_t final_message = 0;
};

void write_message(json_writer& w, const storage::message_record& m,
                   const std::map<storage::row_id, run_view>* runs = nullptr,
                   bool with_steps = false) {
  w.begin_object();
  w.key("id").value(m.id);
  w.key("role").value(m.role);
  w.key("content").value(m.content);
  if (!m.tool_calls_json.empty()) {
    w.key("tool_calls").raw(m.tool_calls_json);
  }
  if (!m.tool_call_id.empty()) {
    w.key("tool_call_id").value(m.tool_call_id);
  }
  const run_view* run = nullptr;
  if (m.run_id && runs) {
    if (auto it = runs->find(*m.run_id); it != runs->end()) {
      run = &it->second;
    }
  }
  if (run) {
    w.key("run_id").value(run->uuid);
  }
  w.key("prompt_tokens").value(m.prompt_tokens);
  w.key("completion_tokens").value(m.completion_tokens);
  w.key("created_at").value(m.created_at);
  if (with_steps && run && run->final_message == m.id) {
    // The run's steps ride on its final answer.
    w.key("steps").begin_array();
    for (const auto& st : run->steps) {
      w.begin_object().key("seq").value(st.seq).key("kind").value(st.kind);
      w.key("name").value(st.name).key("status").value(st.status);
      w.key("output").raw(st.output_json.empty() ? std::string_view("null") : st.output_json);
      w.end_object();
    }
    w.end_array();
  }
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
  if (auto bad = detail::read_page(ctx.request(), p)) {
    co_return *bad;
  }
  auto rows = read(state, [&](auto& c) { return storage::list_users(c, p); });
  auto total = read(state, [&](auto& c) { return storage::count_users(c); });
  if (!rows || !total) {
    co_return error_response(!rows ? rows.error() : total.error());
  }
  co_return page_answer(*rows, total->count, p, write_user);
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

// --- tokens ---

asio::awaitable<http_response> list_tokens(state_ptr state, request_context& ctx,
                                           api_caller caller) {
  storage::page p;
  if (auto bad = detail::read_page(ctx.request(), p)) {
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
  auto rows = read(state, [&](auto& c) { return storage::list_api_tokens(c, user_id, p); });
  auto total = read(state, [&](auto& c) { return storage::count_api_tokens(c, user_id); });
  if (!rows || !total) {
    co_return error_response(!rows ? rows.error() : total.error());
  }
  co_return page_answer(*rows, total->count, p, write_token);
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

// --- agents ---

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
  if (auto bad = detail::read_page(ctx.request(), p)) {
    co_return *bad;
  }
  auto rows = read(state, [&](auto& c) { return storage::list_agents(c, p); });
  auto total = read(state, [&](auto& c) { return storage::count_agents(c); });
  if (!rows || !total) {
    co_return error_response(!rows ? rows.error() : total.error());
  }
  co_return page_answer(*rows, total->count, p, write_agent);
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

// --- providers ---

void read_provider_fields(json_body& body, storage::provider_record& p, bool creating) {
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
    p.api_key_ref = *v;
  }
  if (auto v = body.text("api_key", false, 4096)) {
    p.api_key = *v;
  }
  if (auto v = body.object("config")) {
    p.config_json = *v;
  }
}

asio::awaitable<http_response> list_providers(state_ptr state, request_context& ctx) {
  storage::page p;
  if (auto bad = detail::read_page(ctx.request(), p)) {
    co_return *bad;
  }
  auto rows = read(state, [&](auto& c) { return storage::list_providers(c, p); });
  auto total = read(state, [&](auto& c) { return storage::count_providers(c); });
  if (!rows || !total) {
    co_return error_response(!rows ? rows.error() : total.error());
  }
  co_return page_answer(*rows, total->count, p, write_provider);
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
  read_provider_fields(body, p, true);
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
  read_provider_fields(body, *p, false);
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
  config.api_key = p->api_key;
  if (config.api_key.empty() && !p->api_key_ref.empty()) {
    if (const char* key = std::getenv(p->api_key_ref.c_str())) {
      config.api_key = key;
    }
  }
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

// --- conversations ---

std::optional<storage::conversation_record>
own_conversation(const state_ptr& state, request_context& ctx, const api_caller& caller) {
  const std::string uuid(ctx.param("id"));
  auto c = read(state, [&](auto& conn) {
    return storage::find_conversation_by_uuid(conn, uuid, caller.user_id);
  });
  if (!c) {
    return std::nullopt;
  }
  return *c;
}

asio::awaitable<http_response> list_conversations(state_ptr state, request_context& ctx,
                                                  api_caller caller) {
  storage::page p;
  if (auto bad = detail::read_page(ctx.request(), p)) {
    co_return *bad;
  }
  auto rows =
      read(state, [&](auto& c) { return storage::list_conversations_page(c, caller.user_id, p); });
  auto total =
      read(state, [&](auto& c) { return storage::count_conversations(c, caller.user_id); });
  if (!rows || !total) {
    co_return error_response(!rows ? rows.error() : total.error());
  }
  co_return page_answer(*rows, total->count, p, write_conversation);
}

asio::awaitable<http_response> get_conversation(state_ptr state, request_context& ctx,
                                                api_caller caller) {
  auto c = own_conversation(state, ctx, caller);
  if (!c) {
    co_return not_found("conversation");
  }
  co_return one_answer(200, *c, write_conversation);
}

asio::awaitable<http_response> conversation_messages(state_ptr state, request_context& ctx,
                                                     api_caller caller) {
  auto conv = own_conversation(state, ctx, caller);
  if (!conv) {
    co_return not_found("conversation");
  }
  storage::page p;
  if (auto bad = detail::read_page(ctx.request(), p)) {
    co_return *bad;
  }
  auto all = read(state, [&](auto& c) { return storage::list_messages(c, conv->id); });
  if (!all) {
    co_return error_response(all.error());
  }
  const auto total = static_cast<std::int64_t>(all->size());
  const auto from = std::min(p.offset, total);
  const auto to = std::min(from + p.limit, total);
  std::vector<storage::message_record> window(all->begin() + from, all->begin() + to);
  // `?steps=true`: each run's steps on its final answer.
  const bool with_steps = ctx.request().query_param("steps") == "true";
  std::map<storage::row_id, run_view> runs;
  for (const auto& m : *all) {
    if (!m.run_id) {
      continue;
    }
    auto [it, added] = runs.try_emplace(*m.run_id);
    if (added) {
      auto run = read(state, [&](auto& c) { return storage::find_run(c, *m.run_id); });
      it->second.uuid = run ? run->uuid : std::string();
      if (with_steps) {
        auto steps = read(state, [&](auto& c) { return storage::list_steps(c, *m.run_id); });
        if (steps) {
          it->second.steps = std::move(*steps);
        }
      }
    }
    if (m.role == "assistant" && m.tool_calls_json.empty()) {
      it->second.final_message = m.id;
    }
  }
  co_return page_answer(window, total, p, [&](json_writer& w, const storage::message_record& m) {
    write_message(w, m, &runs, with_steps);
  });
}

asio::awaitable<http_response> delete_conversation(state_ptr state, request_context& ctx,
                                                   api_caller caller) {
  auto conv = own_conversation(state, ctx, caller);
  if (!conv) {
    co_return not_found("conversation");
  }
  auto active = read(state, [&](auto& c) { return storage::has_active_run(c, conv->id); });
  if (!active) {
    co_return error_response(active.error());
  }
  if (*active) {
    co_return http_response::error(409, "conflict",
                                   "a run of this conversation is active; cancel it first");
  }
  auto pending = store(state, "delete conversation",
                       [i = conv->id](auto& c) { return storage::delete_conversation(c, i); });
  auto done = co_await std::move(pending);
  if (!done) {
    co_return error_response(done.error());
  }
  co_return http_response{204, "application/json", {}, {}};
}

} // namespace

void add_api_routes(net::router& routes, std::shared_ptr<api_state> state) {
  using net::http_method;
  std::set<std::string> preflighted;
  auto add = [&](http_method method, std::string_view pattern, api_access access,
                 api_handler handler) {
    routes.add(method, pattern, guard(state, access, std::move(handler)));
    if (preflighted.emplace(pattern).second) {
      add_preflight(routes, state, pattern);
    }
  };
  // Each handler is a plain lambda calling a coroutine function with its arguments by
  // value: a capturing coroutine lambda would dangle after its first suspension.
  add(http_method::get, "/api/v1/me", api_access::chat,
      [state](request_context&, const api_caller& caller) { return get_me(state, caller); });

  add(http_method::get, "/api/v1/users", api_access::admin,
      [state](request_context& ctx, const api_caller&) { return list_users(state, ctx); });
  add(http_method::post, "/api/v1/users", api_access::admin,
      [state](request_context& ctx, const api_caller&) { return create_user(state, ctx); });

  add(http_method::get, "/api/v1/tokens", api_access::user,
      [state](request_context& ctx, const api_caller& caller) {
        return list_tokens(state, ctx, caller);
      });
  add(http_method::post, "/api/v1/tokens", api_access::user,
      [state](request_context& ctx, const api_caller& caller) {
        return create_token(state, ctx, caller);
      });
  add(http_method::del, "/api/v1/tokens/{id}", api_access::user,
      [state](request_context& ctx, const api_caller& caller) {
        return revoke_token(state, ctx, caller);
      });

  add(http_method::get, "/api/v1/agents", api_access::user,
      [state](request_context& ctx, const api_caller&) { return list_agents(state, ctx); });
  add(http_method::post, "/api/v1/agents", api_access::admin,
      [state](request_context& ctx, const api_caller&) { return create_agent(state, ctx); });
  add(http_method::get, "/api/v1/agents/{id}", api_access::user,
      [state](request_context& ctx, const api_caller&) { return get_agent(state, ctx); });
  add(http_method::patch, "/api/v1/agents/{id}", api_access::admin,
      [state](request_context& ctx, const api_caller&) { return update_agent(state, ctx); });
  add(http_method::put, "/api/v1/agents/{id}", api_access::admin,
      [state](request_context& ctx, const api_caller&) { return update_agent(state, ctx); });
  add(http_method::del, "/api/v1/agents/{id}", api_access::admin,
      [state](request_context& ctx, const api_caller&) { return delete_agent(state, ctx); });

  add(http_method::get, "/api/v1/providers", api_access::admin,
      [state](request_context& ctx, const api_caller&) { return list_providers(state, ctx); });
  add(http_method::post, "/api/v1/providers", api_access::admin,
      [state](request_context& ctx, const api_caller&) { return create_provider(state, ctx); });
  add(http_method::get, "/api/v1/providers/{id}", api_access::admin,
      [state](request_context& ctx, const api_caller&) { return get_provider(state, ctx); });
  add(http_method::patch, "/api/v1/providers/{id}", api_access::admin,
      [state](request_context& ctx, const api_caller&) { return update_provider(state, ctx); });
  add(http_method::put, "/api/v1/providers/{id}", api_access::admin,
      [state](request_context& ctx, const api_caller&) { return update_provider(state, ctx); });
  add(http_method::del, "/api/v1/providers/{id}", api_access::admin,
      [state](request_context& ctx, const api_caller&) { return delete_provider(state, ctx); });
  add(http_method::get, "/api/v1/providers/{id}/models", api_access::admin,
      [state](request_context& ctx, const api_caller&) { return provider_models(state, ctx); });

  add(http_method::get, "/api/v1/conversations", api_access::user,
      [state](request_context& ctx, const api_caller& caller) {
        return list_conversations(state, ctx, caller);
      });
  add(http_method::get, "/api/v1/conversations/{id}", api_access::user,
      [state](request_context& ctx, const api_caller& caller) {
        return get_conversation(state, ctx, caller);
      });
  add(http_method::get, "/api/v1/conversations/{id}/messages", api_access::user,
      [state](request_context& ctx, const api_caller& caller) {
        return conversation_messages(state, ctx, caller);
      });
  add(http_method::del, "/api/v1/conversations/{id}", api_access::user,
      [state](request_context& ctx, const api_caller& caller) {
        return delete_conversation(state, ctx, caller);
      });

  add_file_routes(routes, state, preflighted);
  add_chat_routes(routes, state, preflighted);
}

} // namespace troupe::actors
