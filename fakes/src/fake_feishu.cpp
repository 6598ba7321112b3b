#include "support/fake_feishu.hpp"

#include <mutex>
#include <set>

#include <fmt/format.h>
#include <simdjson.h>

#include "troupe/net/channel/feishu_wire.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::test {

using net::http_method;
using net::http_response;
using net::request_context;

struct fake_feishu::state {
  std::string app_id;
  std::string app_secret;
  std::chrono::seconds token_life{7200};
  call_log log;
  fault_plan<feishu_fault> faults;

  mutable std::mutex mutex;
  mutable std::condition_variable replied;
  std::map<std::string, std::chrono::steady_clock::time_point> tokens;
  std::vector<feishu_reply> replies;
  std::map<std::string, std::string> by_uuid;
  std::uint64_t next_id = 0;
  std::function<void(std::string_view)> hook;
};

namespace {

using state_ptr = std::shared_ptr<fake_feishu::state>;

/// Feishu's largest text message body (150 KB).
constexpr std::size_t max_content = 150 * 1024;

http_response feishu_error(unsigned status, std::int64_t code, std::string_view msg) {
  json_writer w;
  w.begin_object().key("code").value(code).key("msg").value(msg).key("data").begin_object();
  w.end_object().end_object();
  return http_response::json(status, std::move(w).str());
}

http_response fault_answer(const feishu_fault& f) {
  switch (f.what) {
    case feishu_fault::kind::rate_limited: {
      auto r = feishu_error(429, 99991400, "request trigger frequency limit");
      r.headers.push_back({"x-ogw-ratelimit-limit", "50"});
      r.headers.push_back({"x-ogw-ratelimit-reset", std::to_string(f.retry_after)});
      return r;
    }
    case feishu_fault::kind::server_error:
      return http_response::text(500, "<html><body>500 Internal Server Error</body></html>",
                                 "text/html");
    case feishu_fault::kind::token_invalid:
      return feishu_error(200, 99991663, "Invalid access token for authorization.");
  }
  return feishu_error(500, 1, "internal");
}

/// The string members of a JSON object body.
std::map<std::string, std::string> string_fields(std::string_view body) {
  std::map<std::string, std::string> out;
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (parser.parse(simdjson::padded_string(body)).get_object().get(object) != simdjson::SUCCESS) {
    return out;
  }
  for (auto field : object) {
    std::string_view text;
    if (field.value.get_string().get(text) == simdjson::SUCCESS) {
      out.emplace(std::string(field.key), std::string(text));
    }
  }
  return out;
}

http_response issue_token(const net::http_request& request, const state_ptr& st) {
  auto args = string_fields(request.body);
  if (args["app_id"] != st->app_id || args["app_secret"] != st->app_secret) {
    return feishu_error(400, 10014, "app secret invalid");
  }
  std::string token;
  {
    const std::lock_guard lock(st->mutex);
    token = fmt::format("t-fake-{}", ++st->next_id);
    st->tokens[token] = std::chrono::steady_clock::now() + st->token_life;
  }
  json_writer w;
  w.begin_object().key("code").value(0).key("msg").value("ok");
  w.key("tenant_access_token").value(token);
  w.key("expire").value(static_cast<std::int64_t>(st->token_life.count()));
  return http_response::json(200, std::move(w.end_object()).str());
}

http_response reply(const net::http_request& request, std::string parent, const state_ptr& st) {
  auto auth = std::string(request.header("Authorization"));
  const auto token = auth.starts_with("Bearer ") ? auth.substr(7) : std::string();
  auto args = string_fields(request.body);
  std::string text;
  {
    simdjson::dom::parser parser;
    simdjson::dom::object content;
    std::string_view t;
    if (args["msg_type"] != "text" ||
        parser.parse(simdjson::padded_string(args["content"])).get_object().get(content) !=
            simdjson::SUCCESS ||
        content["text"].get_string().get(t) != simdjson::SUCCESS) {
      return feishu_error(400, 230001, "Your request contains an invalid request parameter.");
    }
    text = std::string(t);
  }
  if (args["content"].size() > max_content) {
    return feishu_error(400, 230025, "The length of the message content reaches its limit.");
  }
  feishu_reply r{std::move(parent), std::move(text), args["uuid"], {}};
  {
    const std::lock_guard lock(st->mutex);
    const auto it = st->tokens.find(token);
    if (it == st->tokens.end() || it->second <= std::chrono::steady_clock::now()) {
      return feishu_error(200, 99991663, "Invalid access token for authorization.");
    }
    if (!r.uuid.empty()) {
      if (auto seen = st->by_uuid.find(r.uuid); seen != st->by_uuid.end()) {
        r.message_id = seen->second; // the same request again: the first reply
      }
    }
    if (r.message_id.empty()) {
      r.message_id = fmt::format("om_fake_{}", ++st->next_id);
      if (!r.uuid.empty()) {
        st->by_uuid[r.uuid] = r.message_id;
      }
      st->replies.push_back(r);
    }
  }
  st->replied.notify_all();
  if (st->hook) {
    st->hook(r.text);
  }
  json_writer w;
  w.begin_object().key("code").value(0).key("msg").value("success").key("data").begin_object();
  w.key("message_id").value(r.message_id).key("msg_type").value("text").end_object();
  return http_response::json(200, std::move(w.end_object()).str());
}

asio::awaitable<http_response> handle(request_context& ctx, state_ptr st, std::string method) {
  auto request = ctx.request();
  http_response r;
  if (auto fault = st->faults.take(method)) {
    r = fault_answer(*fault);
  } else if (method == "token") {
    r = issue_token(request, st);
  } else {
    r = reply(request, std::string(ctx.param("id")), st);
  }
  st->log.add({std::move(method), std::move(request.headers), std::move(request.body), r.status,
               r.body, std::chrono::steady_clock::now()});
  co_return r;
}

} // namespace

fake_feishu::fake_feishu(std::string app_id, std::string app_secret,
                         std::chrono::seconds token_life)
    : state_(std::make_shared<state>()) {
  state_->app_id = std::move(app_id);
  state_->app_secret = std::move(app_secret);
  state_->token_life = token_life;
  net::router routes;
  auto st = state_;
  routes.add(http_method::post, "/open-apis/auth/v3/tenant_access_token/internal",
             [st](request_context& ctx) { return handle(ctx, st, "token"); });
  routes.add(http_method::post, "/open-apis/im/v1/messages/{id}/reply",
             [st](request_context& ctx) { return handle(ctx, st, "reply"); });
  server_ = std::make_unique<loopback_server>(std::move(routes), "fake-feishu");
}

fake_feishu::~fake_feishu() {
  server_.reset();
}

std::string fake_feishu::api_base() const {
  return server_->origin() + "/open-apis";
}
const std::string& fake_feishu::app_id() const noexcept {
  return state_->app_id;
}
const std::string& fake_feishu::app_secret() const noexcept {
  return state_->app_secret;
}

void fake_feishu::expire_tokens() {
  const std::lock_guard lock(state_->mutex);
  for (auto& [token, until] : state_->tokens) {
    until = std::chrono::steady_clock::now();
  }
}
void fake_feishu::on_reply(std::function<void(std::string_view)> hook) {
  const std::lock_guard lock(state_->mutex);
  state_->hook = std::move(hook);
}
void fake_feishu::fail(std::string method, feishu_fault fault, std::size_t times) {
  state_->faults.add(std::move(method), fault, times);
}
void fake_feishu::clear_faults() {
  state_->faults.clear();
}
std::vector<recorded_call> fake_feishu::calls(std::string_view method) const {
  return state_->log.of(method);
}
bool fake_feishu::wait_for_calls(std::string_view method, std::size_t n,
                                 std::chrono::milliseconds deadline) const {
  return state_->log.wait_for(method, n, deadline);
}
std::vector<feishu_reply> fake_feishu::replies() const {
  const std::lock_guard lock(state_->mutex);
  return state_->replies;
}
bool fake_feishu::wait_for_replies(std::size_t n, std::chrono::milliseconds deadline) const {
  std::unique_lock lock(state_->mutex);
  return state_->replied.wait_for(lock, deadline, [&] { return state_->replies.size() >= n; });
}

feishu_event_sender::feishu_event_sender(std::string url, std::string verification_token,
                                         std::string encrypt_key)
    : url_(std::move(url)), token_(std::move(verification_token)), key_(std::move(encrypt_key)) {}

std::string feishu_event_sender::event_body(const message& m) const {
  json_writer content;
  content.begin_object().key("text").value(m.text).end_object();
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  json_writer w;
  w.begin_object().key("schema").value("2.0").key("header").begin_object();
  w.key("event_id").value(m.event_id).key("token").value(token_);
  w.key("create_time").value(std::to_string(now_ms));
  w.key("event_type").value("im.message.receive_v1").key("tenant_key").value("fake-tenant");
  w.key("app_id").value("cli_fake").end_object();
  w.key("event").begin_object().key("sender").begin_object().key("sender_id").begin_object();
  w.key("open_id").value(m.sender).key("user_id").value("fake-user").end_object();
  w.key("sender_type").value(m.sender_type).key("tenant_key").value("fake-tenant").end_object();
  w.key("message").begin_object().key("message_id").value(m.message_id);
  if (!m.root_id.empty()) {
    w.key("root_id").value(m.root_id).key("parent_id").value(m.root_id);
  }
  if (!m.thread_id.empty()) {
    w.key("thread_id").value(m.thread_id);
  }
  w.key("create_time").value(std::to_string(now_ms)).key("chat_id").value(m.chat_id);
  w.key("chat_type").value(m.chat_type).key("message_type").value(m.message_type);
  w.key("content").value(content.str()).end_object();
  w.end_object().end_object();
  return std::move(w).str();
}

std::string feishu_event_sender::url_verification_body(std::string_view challenge) const {
  json_writer w;
  w.begin_object().key("challenge").value(challenge).key("token").value(token_);
  w.key("type").value("url_verification").end_object();
  return std::move(w).str();
}

net::http_client_request feishu_event_sender::request(const std::string& plain,
                                                      const delivery& how) const {
  net::http_client_request request;
  request.method = http_method::post;
  request.url = url_;
  request.headers.push_back({"Content-Type", "application/json; charset=utf-8"});
  if (key_.empty()) {
    request.body = plain;
  } else {
    const auto iv = random_bytes(16).value_or(std::string(16, 'i'));
    json_writer w;
    w.begin_object().key("encrypt").value(net::feishu::encrypt(key_, iv, plain)).end_object();
    request.body = std::move(w).str();
    if (!how.unsigned_request) {
      const auto timestamp = std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count());
      const auto nonce = new_uuid().substr(0, 8);
      request.headers.push_back({std::string(net::feishu::timestamp_header), timestamp});
      request.headers.push_back({std::string(net::feishu::nonce_header), nonce});
      request.headers.push_back(
          {std::string(net::feishu::signature_header),
           net::feishu::sign(timestamp, nonce, how.wrong_signing_key.value_or(key_),
                             request.body)});
    }
  }
  request.deadlines.connect = how.deadline;
  request.deadlines.first_byte = how.deadline;
  request.deadlines.total = how.deadline;
  return request;
}

expected<net::http_client_response> feishu_event_sender::send(const std::string& plain,
                                                              delivery how) const {
  return blocking_fetch(request(plain, how));
}

} // namespace troupe::test
