// The /api/v1 channels routes: list, read and list threads (admin tokens), create, update
// and delete (admin tokens; a channel declared in the config file is changed there), and
// the platforms' inbound webhook `POST /api/v1/webhooks/channels/{name}` and its URL check
// `GET` on the same path, which carry no bearer token: the channel's adapter verifies its platform
// instead. Secrets are write-only: an answer says whether a token is set, never what it is.

#include <fmt/format.h>

#include "json.hpp"
#include "state.hpp"
#include "troupe/runtime/channel_config.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/storage/channels.hpp"

namespace troupe::api {

namespace {

constexpr std::size_t dead_letters_shown = 20;

/// What an answer says of a channel besides its row.
struct channel_view {
  storage::channel_record row;
  std::string agent_name;
  std::string agent_id;
  std::vector<storage::outbox_record> outbox;
  storage::inbound_counts journal;
};

void write_channel(json_writer& w, const channel_view& v) {
  const auto& c = v.row;
  w.begin_object();
  w.key("name").value(c.name);
  w.key("type").value(c.kind);
  w.key("agent").value(v.agent_name);
  w.key("agent_id").value(v.agent_id);
  if (c.kind == "telegram") {
    w.key("mode").value(c.mode);
  }
  w.key("token_env").value(c.token_env);
  // Write-only: whether a token is stored (sealed), never the token.
  w.key("token_set").value(!c.token.empty());
  w.key("bot_token_env").value(c.bot_token_env);
  w.key("signing_secret_env").value(c.signing_secret_env);
  w.key("api_base").value(c.api_base);
  // The platforms' keys; WeCom's `agent_id` (its app's AgentId) shows as
  // `wecom_agent_id`, since `agent_id` here is the troupe agent's.
  for (const auto& [field, member] : channel_platform_keys::fields) {
    if (!(c.platform.*member).empty()) {
      w.key(field == "agent_id" ? std::string_view("wecom_agent_id") : field)
          .value(c.platform.*member);
    }
  }
  w.key("session_scope").value(c.session_scope);
  w.key("queue_policy").value(c.queue_policy);
  w.key("callback_url").value(c.callback_url);
  w.key("stream_edits").value(c.stream_edits);
  w.key("enabled").value(c.enabled);
  w.key("declared").value(c.declared);
  w.key("webhook_path").value(fmt::format("/api/v1/webhooks/channels/{}", c.name));
  std::int64_t pending = 0;
  std::int64_t sent = 0;
  std::int64_t dead = 0;
  for (const auto& o : v.outbox) {
    (o.status == "sent" ? sent : o.status == "dead" ? dead : pending) += 1;
  }
  w.key("outbox").begin_object();
  w.key("pending").value(pending).key("sent").value(sent).key("dead").value(dead);
  w.end_object();
  // The inbound journal: every message the platform delivered once (duplicates and
  // refused requests are not in it), by where it stands.
  w.key("journal").begin_object();
  w.key("messages").value(v.journal.total);
  w.key("received").value(v.journal.received).key("processing").value(v.journal.processing);
  w.key("done").value(v.journal.done).key("dead").value(v.journal.dead);
  w.end_object();
  // Replies that could not be delivered (the newest first).
  w.key("dead_letters").begin_array();
  std::size_t shown = 0;
  for (auto it = v.outbox.rbegin(); it != v.outbox.rend() && shown < dead_letters_shown; ++it) {
    if (it->status != "dead") {
      continue;
    }
    ++shown;
    w.begin_object();
    w.key("run_id").value(it->run_uuid);
    w.key("part").value(it->part);
    w.key("text").value(it->text);
    w.key("attempts").value(it->attempts);
    w.key("last_error").value(it->last_error);
    w.key("updated_at").value(it->updated_at);
    w.end_object();
  }
  w.end_array();
  w.key("created_at").value(c.created_at);
  w.key("updated_at").value(c.updated_at);
  w.end_object();
}

expected<channel_view> view_of(const state_ptr& state, storage::channel_record row) {
  channel_view v;
  auto agent = state->catalog
                   ? state->catalog->agent(row.agent_id)
                   : read(state, [&](auto& c) { return storage::find_agent(c, row.agent_id); });
  if (agent) {
    v.agent_name = agent->name;
    v.agent_id = agent->uuid;
  }
  auto outbox = read(state, [&](auto& c) { return storage::list_outbox(c, row.id, ""); });
  if (!outbox) {
    return tl::unexpected(outbox.error());
  }
  v.outbox = std::move(*outbox);
  auto journal = read(state, [=](auto& c) { return storage::count_inbound_by_status(c, row.id); });
  if (!journal) {
    return tl::unexpected(journal.error());
  }
  v.journal = *journal;
  v.row = std::move(row);
  return v;
}

/// The settings a row stands for (a sealed token reads as set, so validation sees one).
channel_settings settings_of(const storage::channel_record& r, const std::string& agent) {
  channel_settings ch;
  ch.name = r.name;
  ch.type = parse_channel_type(r.kind).value_or(channel_type::webhook);
  ch.agent = agent;
  ch.mode = r.mode;
  ch.token_env = r.token_env;
  ch.token = r.token.empty() ? "" : "sealed";
  ch.bot_token_env = r.bot_token_env;
  ch.signing_secret_env = r.signing_secret_env;
  ch.api_base = r.api_base;
  ch.platform = r.platform;
  ch.scope = parse_session_scope(r.session_scope).value_or(session_scope::thread);
  ch.queue = parse_queue_policy(r.queue_policy).value_or(queue_policy::followup);
  ch.callback_url = r.callback_url;
  ch.stream_edits = r.stream_edits;
  ch.enabled = r.enabled;
  return ch;
}

std::optional<bool> read_bool(json_body& body, std::string_view field) {
  auto e = body.element(field);
  if (!e) {
    return std::nullopt;
  }
  bool value = false;
  if (e->get_bool().get(value) != simdjson::SUCCESS) {
    body.invalid(field, "must be true or false");
    return std::nullopt;
  }
  return value;
}

/// Applies the body onto `r`; `creating` makes name, type and agent required. The agent
/// is resolved by name or uuid. Problems are recorded in `body`.
void read_channel_fields(const state_ptr& state, json_body& body, storage::channel_record& r,
                         std::string& agent_name, bool creating) {
  body.only({"name",
             "type",
             "agent",
             "mode",
             "token",
             "token_env",
             "bot_token_env",
             "signing_secret_env",
             "api_base",
             "session_scope",
             "queue_policy",
             "callback_url",
             "stream_edits",
             "enabled",
             "corp_id",
             "agent_id",
             "secret_env",
             "aes_key_env",
             "app_id",
             "app_secret_env",
             "phone_number_id",
             "access_token_env",
             "verify_token_env",
             "verification_token_env",
             "encrypt_key_env",
             "app_key",
             "robot_code"});
  if (creating) {
    if (auto v = body.text("name", true, 64)) {
      r.name = *v;
    }
  } else if (body.has("name")) {
    body.invalid("name", "cannot be changed (delete and create the channel)");
  }
  if (auto v = body.text("type", creating, 32)) {
    if (!parse_channel_type(*v)) {
      body.invalid(
          "type",
          "must be telegram, slack, webhook, wecom, wechat_mp, whatsapp, feishu or dingtalk");
    }
    r.kind = *v;
  }
  if (auto v = body.text("agent", creating, 256)) {
    auto agent = state->catalog
                     ? state->catalog->agent_by_name_or_uuid(*v)
                     : read(state, [&](auto& c) { return storage::find_agent_by_name(c, *v); });
    if (!agent) {
      body.invalid("agent", fmt::format("no agent '{}'", *v));
    } else {
      r.agent_id = agent->id;
      agent_name = agent->name;
    }
  }
  for (auto [field, into] : {std::pair<std::string_view, std::string*>{"mode", &r.mode},
                             {"token_env", &r.token_env},
                             {"bot_token_env", &r.bot_token_env},
                             {"signing_secret_env", &r.signing_secret_env},
                             {"api_base", &r.api_base},
                             {"session_scope", &r.session_scope},
                             {"queue_policy", &r.queue_policy},
                             {"callback_url", &r.callback_url}}) {
    if (auto v = body.text(field, false, 2048)) {
      *into = *v;
    }
  }
  for (const auto& [field, member] : channel_platform_keys::fields) {
    if (auto v = body.text(field, false, 256)) {
      r.platform.*member = *v;
    }
  }
  if (auto v = body.text("token", false, 4096)) {
    // Sealed before it is stored; the plain token lives only in this request.
    if (v->empty()) {
      r.token.clear();
    } else if (!state->secrets) {
      body.invalid("token", "cannot be stored: this node has no secret key");
    } else if (auto sealed = state->secrets->seal(*v); !sealed) {
      body.invalid("token", "cannot be encrypted: " + sealed.error().message);
    } else {
      r.token = std::move(*sealed);
    }
  }
  if (auto v = read_bool(body, "stream_edits")) {
    r.stream_edits = *v;
  }
  if (auto v = read_bool(body, "enabled")) {
    r.enabled = *v;
  }
  if (!body.ok()) {
    return;
  }
  if (!parse_session_scope(r.session_scope)) {
    body.invalid("session_scope", "must be thread, sender or thread_sender");
    return;
  }
  if (!parse_queue_policy(r.queue_policy)) {
    body.invalid("queue_policy", "must be followup, steer, interrupt or collect");
    return;
  }
  // The same rules as a [[channels]] entry (names, secrets per type, variables allowed).
  if (auto valid = validate_channel(settings_of(r, agent_name), state->key_env); !valid) {
    const auto& message = valid.error().message;
    const auto colon = message.find(": ");
    body.invalid("body", colon == std::string::npos ? message : message.substr(colon + 2));
  }
}

asio::awaitable<http_response> answer_channel(state_ptr state, unsigned status,
                                              const std::string& name) {
  auto row = read(state, [&](auto& c) { return storage::find_channel_by_name(c, name); });
  if (!row) {
    co_return error_response(row.error());
  }
  auto v = view_of(state, std::move(*row));
  if (!v) {
    co_return error_response(v.error());
  }
  co_return one_answer(status, *v, write_channel);
}

asio::awaitable<http_response> list_channels(state_ptr state, request_context& ctx) {
  storage::page p;
  if (auto bad = read_page(ctx.request(), p)) {
    co_return std::move(*bad);
  }
  auto rows = read(state, [&](auto& c) { return storage::list_channels_page(c, p); });
  if (!rows) {
    co_return error_response(rows.error());
  }
  auto total = read(state, [](auto& c) { return storage::count_channels(c); });
  if (!total) {
    co_return error_response(total.error());
  }
  std::vector<channel_view> views;
  for (auto& r : *rows) {
    auto v = view_of(state, std::move(r));
    if (!v) {
      co_return error_response(v.error());
    }
    views.push_back(std::move(*v));
  }
  co_return page_answer(views, total->count, p, write_channel);
}

asio::awaitable<http_response> get_channel(state_ptr state, request_context& ctx) {
  const std::string name(ctx.param("name"));
  auto answering = answer_channel(state, 200, name);
  co_return co_await std::move(answering);
}

asio::awaitable<http_response> create_channel(state_ptr state, request_context& ctx) {
  json_body body(ctx.request().body);
  storage::channel_record r;
  std::string agent_name;
  read_channel_fields(state, body, r, agent_name, true);
  if (!body.ok()) {
    co_return body.error_response();
  }
  auto pending =
      store(state, "create channel", [r](auto& c) { return storage::insert_channel(c, r); });
  auto id = co_await std::move(pending);
  if (!id) {
    if (id.error().code == errc::conflict) {
      co_return http_response::error(409, "conflict",
                                     fmt::format("a channel named '{}' exists", r.name));
    }
    co_return error_response(id.error());
  }
  if (state->channels) {
    state->channels->forget(r.name);
  }
  auto answering = answer_channel(state, 201, r.name);
  co_return co_await std::move(answering);
}

/// The channel named in the path, unless it is declared in the config (409) or missing.
expected<storage::channel_record> editable(const state_ptr& state, request_context& ctx,
                                           std::optional<http_response>& refusal) {
  const std::string name(ctx.param("name"));
  auto row = read(state, [&](auto& c) { return storage::find_channel_by_name(c, name); });
  if (!row) {
    refusal = not_found("channel");
    return row;
  }
  if (row->declared) {
    refusal = http_response::error(
        409, "conflict",
        fmt::format("channel '{}' is declared in the config file: change it there", name));
    return fail(errc::conflict, "declared");
  }
  return row;
}

asio::awaitable<http_response> update_channel(state_ptr state, request_context& ctx) {
  std::optional<http_response> refusal;
  auto row = editable(state, ctx, refusal);
  if (!row) {
    co_return std::move(*refusal);
  }
  json_body body(ctx.request().body);
  auto agent = state->catalog
                   ? state->catalog->agent(row->agent_id)
                   : read(state, [&](auto& c) { return storage::find_agent(c, row->agent_id); });
  std::string agent_name = agent ? agent->name : std::string();
  read_channel_fields(state, body, *row, agent_name, false);
  if (!body.ok()) {
    co_return body.error_response();
  }
  auto pending =
      store(state, "update channel", [r = *row](auto& c) { return storage::update_channel(c, r); });
  auto done = co_await std::move(pending);
  if (!done) {
    co_return error_response(done.error());
  }
  if (state->channels) {
    state->channels->forget(row->name);
  }
  auto answering = answer_channel(state, 200, row->name);
  co_return co_await std::move(answering);
}

asio::awaitable<http_response> delete_channel(state_ptr state, request_context& ctx) {
  std::optional<http_response> refusal;
  auto row = editable(state, ctx, refusal);
  if (!row) {
    co_return std::move(*refusal);
  }
  auto pending = store(state, "delete channel",
                       [id = row->id](auto& c) { return storage::delete_channel(c, id); });
  auto done = co_await std::move(pending);
  if (!done) {
    co_return error_response(done.error());
  }
  if (state->channels) {
    state->channels->forget(row->name);
  }
  co_return http_response{204, "application/json", {}, {}};
}

asio::awaitable<http_response> list_threads(state_ptr state, request_context& ctx) {
  storage::page p;
  if (auto bad = read_page(ctx.request(), p)) {
    co_return *bad;
  }
  const std::string name(ctx.param("name"));
  auto channel = read(state, [&](auto& c) { return storage::find_channel_by_name(c, name); });
  if (!channel) {
    co_return not_found("channel");
  }
  auto rows = read(state, [&](auto& c) {
    return storage::list_channel_threads(c, channel->id, p.limit, p.offset);
  });
  auto total = read(state, [&](auto& c) {
    return c.query_int("SELECT COUNT(*) FROM channel_threads WHERE channel_id = ?", channel->id);
  });
  if (!rows || !total) {
    co_return error_response(!rows ? rows.error() : total.error());
  }
  struct thread_view {
    storage::channel_thread_record row;
    std::string owner;
    std::string conversation;
  };
  std::vector<thread_view> views;
  for (auto& t : *rows) {
    thread_view v;
    if (auto u = read(state, [&](auto& c) { return storage::find_user(c, t.owner_user_id); })) {
      v.owner = u->name;
    }
    if (t.conversation_id) {
      if (auto conv = read(
              state, [&](auto& c) { return storage::find_conversation(c, *t.conversation_id); })) {
        v.conversation = conv->uuid;
      }
    }
    v.row = std::move(t);
    views.push_back(std::move(v));
  }
  co_return page_answer(views, *total, p, [](json_writer& w, const thread_view& v) {
    w.begin_object();
    w.key("thread_key").value(v.row.thread_key);
    w.key("owner").value(v.owner);
    if (v.conversation.empty()) {
      w.key("conversation_id").value(nullptr);
    } else {
      w.key("conversation_id").value(v.conversation);
    }
    w.key("created_at").value(v.row.created_at);
    w.key("updated_at").value(v.row.updated_at);
    w.end_object();
  });
}

/// The inbound webhook: no bearer token, the adapter verifies the platform.
asio::awaitable<http_response> receive_webhook(state_ptr state, request_context& ctx) {
  if (!state->channels) {
    co_return http_response::error(503, "unavailable", "the channel service is not running");
  }
  auto receiving = state->channels->receive(std::string(ctx.param("name")), ctx.request());
  co_return co_await std::move(receiving);
}

/// A platform's URL check on the same route: answered by the adapter, never journaled.
asio::awaitable<http_response> answer_handshake(state_ptr state, request_context& ctx) {
  if (!state->channels) {
    co_return http_response::error(503, "unavailable", "the channel service is not running");
  }
  auto answering = state->channels->handshake(std::string(ctx.param("name")), ctx.request());
  co_return co_await std::move(answering);
}

} // namespace

void add_channel_routes(route_table& routes) {
  using net::http_method;
  routes.add(http_method::get, "/api/v1/channels", api_access::admin, &list_channels);
  routes.add(http_method::post, "/api/v1/channels", api_access::admin, &create_channel);
  routes.add(http_method::get, "/api/v1/channels/{name}", api_access::admin, &get_channel);
  routes.add(http_method::patch, "/api/v1/channels/{name}", api_access::admin, &update_channel);
  routes.add(http_method::del, "/api/v1/channels/{name}", api_access::admin, &delete_channel);
  routes.add(http_method::get, "/api/v1/channels/{name}/threads", api_access::admin, &list_threads);
  routes.add_open(
      http_method::post, "/api/v1/webhooks/channels/{name}",
      [state = routes.state()](request_context& ctx) { return receive_webhook(state, ctx); });
  routes.add_open(
      http_method::get, "/api/v1/webhooks/channels/{name}",
      [state = routes.state()](request_context& ctx) { return answer_handshake(state, ctx); });
}

} // namespace troupe::api
