#include "support/fake_dingtalk.hpp"

#include <map>
#include <mutex>

#include <fmt/format.h>
#include <simdjson.h>

#include "troupe/net/channel/dingtalk_wire.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::test {

using net::http_method;
using net::http_response;
using net::request_context;

struct fake_dingtalk::state {
  std::string app_key;
  std::string app_secret;
  std::chrono::seconds token_life{7200};
  call_log log;
  fault_plan<dingtalk_fault> faults;

  mutable std::mutex mutex;
  mutable std::condition_variable sent;
  std::map<std::string, std::chrono::steady_clock::time_point> tokens;
  std::map<std::string, std::int64_t> sessions;
  std::vector<dingtalk_send> sends;
  std::uint64_t next_id = 0;
  std::function<void(std::string_view)> hook;
};

namespace {

using state_ptr = std::shared_ptr<fake_dingtalk::state>;

std::int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

http_response api_error(unsigned status, std::string_view code, std::string_view message) {
  json_writer w;
  w.begin_object().key("code").value(code).key("message").value(message);
  w.key("requestid").value("fake-request").end_object();
  return http_response::json(status, std::move(w).str());
}

http_response webhook_answer(std::int64_t errcode, std::string_view errmsg) {
  json_writer w;
  w.begin_object().key("errcode").value(errcode).key("errmsg").value(errmsg).end_object();
  return http_response::json(200, std::move(w).str());
}

http_response fault_answer(const dingtalk_fault& f, bool webhook) {
  switch (f.what) {
    case dingtalk_fault::kind::rate_limited: {
      auto r = webhook ? webhook_answer(130101, "send too fast, exceed 20 times per minute")
                       : api_error(429, "Throttling.Api", "API request frequency exceeds limit");
      if (!webhook) {
        r.status = 429;
      }
      r.headers.push_back({"Retry-After", std::to_string(f.retry_after)});
      return r;
    }
    case dingtalk_fault::kind::server_error:
      return http_response::text(500, "<html><body>500 Internal Server Error</body></html>",
                                 "text/html");
    case dingtalk_fault::kind::token_invalid:
      return api_error(401, "InvalidAuthentication", "不合法的access_token");
  }
  return api_error(500, "InternalError", "internal");
}

struct fields {
  std::map<std::string, std::string> text;
  std::vector<std::string> user_ids;
};

fields read_fields(std::string_view body) {
  fields out;
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (parser.parse(simdjson::padded_string(body)).get_object().get(object) != simdjson::SUCCESS) {
    return out;
  }
  for (auto field : object) {
    std::string_view s;
    simdjson::dom::array a;
    if (field.value.get_string().get(s) == simdjson::SUCCESS) {
      out.text.emplace(std::string(field.key), std::string(s));
    } else if (field.value.get_array().get(a) == simdjson::SUCCESS) {
      for (auto v : a) {
        if (v.get_string().get(s) == simdjson::SUCCESS) {
          out.user_ids.emplace_back(s);
        }
      }
    } else if (field.key == "text") {
      simdjson::dom::object inner;
      if (field.value.get_object().get(inner) == simdjson::SUCCESS &&
          inner["content"].get_string().get(s) == simdjson::SUCCESS) {
        out.text.emplace("content", std::string(s));
      }
    }
  }
  return out;
}

/// The `content` of a sampleText msgParam.
std::optional<std::string> sample_text(const fields& f) {
  const auto key = f.text.find("msgKey");
  const auto param = f.text.find("msgParam");
  if (key == f.text.end() || key->second != "sampleText" || param == f.text.end()) {
    return std::nullopt;
  }
  simdjson::dom::parser parser;
  std::string_view content;
  if (parser.parse(simdjson::padded_string(param->second))["content"].get_string().get(content) !=
      simdjson::SUCCESS) {
    return std::nullopt;
  }
  return std::string(content);
}

http_response issue_token(const net::http_request& request, const state_ptr& st) {
  auto f = read_fields(request.body);
  if (f.text["appKey"] != st->app_key || f.text["appSecret"] != st->app_secret) {
    return api_error(400, "invalidClientIdOrSecret", "无效的clientId或者clientSecret");
  }
  std::string token;
  {
    const std::lock_guard lock(st->mutex);
    token = fmt::format("dt-fake-{}", ++st->next_id);
    st->tokens[token] = std::chrono::steady_clock::now() + st->token_life;
  }
  json_writer w;
  w.begin_object().key("accessToken").value(token);
  w.key("expireIn").value(static_cast<std::int64_t>(st->token_life.count())).end_object();
  return http_response::json(200, std::move(w).str());
}

void record(const state_ptr& st, dingtalk_send s) {
  const auto text = s.text;
  {
    const std::lock_guard lock(st->mutex);
    st->sends.push_back(std::move(s));
  }
  st->sent.notify_all();
  if (st->hook) {
    st->hook(text);
  }
}

http_response robot_send(const std::string& method, const net::http_request& request,
                         const state_ptr& st) {
  const auto token = std::string(request.header(net::dingtalk::token_header));
  {
    const std::lock_guard lock(st->mutex);
    const auto it = st->tokens.find(token);
    if (it == st->tokens.end() || it->second <= std::chrono::steady_clock::now()) {
      return api_error(401, "InvalidAuthentication", "不合法的access_token");
    }
  }
  auto f = read_fields(request.body);
  const auto text = sample_text(f);
  if (!text || f.text["robotCode"] != st->app_key) {
    return api_error(400, "invalidParameter", "robotCode, msgKey or msgParam is invalid");
  }
  std::string target;
  if (method == "batchSend") {
    if (f.user_ids.size() != 1) {
      return api_error(400, "invalidParameter", "userIds is invalid");
    }
    target = f.user_ids.front();
  } else {
    target = f.text["openConversationId"];
    if (target.empty()) {
      return api_error(400, "invalidParameter", "openConversationId is invalid");
    }
  }
  std::string key;
  {
    const std::lock_guard lock(st->mutex);
    key = fmt::format("pqk-fake-{}", ++st->next_id);
  }
  record(st, {method, target, *text});
  json_writer w;
  w.begin_object().key("processQueryKey").value(key);
  if (method == "batchSend") {
    w.key("invalidStaffIdList").begin_array().end_array();
    w.key("flowControlledStaffIdList").begin_array().end_array();
  }
  return http_response::json(200, std::move(w.end_object()).str());
}

http_response session_send(const net::http_request& request, std::string session,
                           const state_ptr& st) {
  {
    const std::lock_guard lock(st->mutex);
    const auto it = st->sessions.find(session);
    if (it == st->sessions.end() || it->second <= unix_ms()) {
      return webhook_answer(300001, "session is expired or invalid");
    }
  }
  auto f = read_fields(request.body);
  if (f.text["msgtype"] != "text" || f.text["content"].empty()) {
    return webhook_answer(400105, "msgtype or content is invalid");
  }
  record(st, {"webhook", std::move(session), f.text["content"]});
  return webhook_answer(0, "ok");
}

asio::awaitable<http_response> handle(request_context& ctx, state_ptr st, std::string method) {
  auto request = ctx.request();
  http_response r;
  if (auto fault = st->faults.take(method)) {
    r = fault_answer(*fault, method == "webhook");
  } else if (method == "token") {
    r = issue_token(request, st);
  } else if (method == "webhook") {
    r = session_send(request, request.query_param("session"), st);
  } else {
    r = robot_send(method, request, st);
  }
  st->log.add({std::move(method), std::move(request.headers), std::move(request.body), r.status,
               r.body, std::chrono::steady_clock::now()});
  co_return r;
}

} // namespace

fake_dingtalk::fake_dingtalk(std::string app_key, std::string app_secret,
                             std::chrono::seconds token_life)
    : state_(std::make_shared<state>()) {
  state_->app_key = std::move(app_key);
  state_->app_secret = std::move(app_secret);
  state_->token_life = token_life;
  net::router routes;
  auto st = state_;
  routes.add(http_method::post, "/v1.0/oauth2/accessToken",
             [st](request_context& ctx) { return handle(ctx, st, "token"); });
  routes.add(http_method::post, "/v1.0/robot/oToMessages/batchSend",
             [st](request_context& ctx) { return handle(ctx, st, "batchSend"); });
  routes.add(http_method::post, "/v1.0/robot/groupMessages/send",
             [st](request_context& ctx) { return handle(ctx, st, "groupSend"); });
  routes.add(http_method::post, "/robot/sendBySession",
             [st](request_context& ctx) { return handle(ctx, st, "webhook"); });
  server_ = std::make_unique<loopback_server>(std::move(routes), "fake-dingtalk");
}

fake_dingtalk::~fake_dingtalk() {
  server_.reset();
}

std::string fake_dingtalk::api_base() const {
  return server_->origin();
}
const std::string& fake_dingtalk::app_key() const noexcept {
  return state_->app_key;
}
const std::string& fake_dingtalk::app_secret() const noexcept {
  return state_->app_secret;
}

fake_dingtalk::session fake_dingtalk::new_session(std::chrono::milliseconds life) {
  session s;
  std::string id;
  {
    const std::lock_guard lock(state_->mutex);
    id = fmt::format("fake-session-{}", ++state_->next_id);
    s.expires_ms = unix_ms() + life.count();
    state_->sessions[id] = s.expires_ms;
  }
  s.url = server_->origin() + "/robot/sendBySession?session=" + id;
  return s;
}

void fake_dingtalk::on_send(std::function<void(std::string_view)> hook) {
  const std::lock_guard lock(state_->mutex);
  state_->hook = std::move(hook);
}
void fake_dingtalk::expire_tokens() {
  const std::lock_guard lock(state_->mutex);
  for (auto& [token, until] : state_->tokens) {
    until = std::chrono::steady_clock::now();
  }
}
void fake_dingtalk::fail(std::string method, dingtalk_fault fault, std::size_t times) {
  state_->faults.add(std::move(method), fault, times);
}
void fake_dingtalk::clear_faults() {
  state_->faults.clear();
}
std::vector<recorded_call> fake_dingtalk::calls(std::string_view method) const {
  return state_->log.of(method);
}
bool fake_dingtalk::wait_for_calls(std::string_view method, std::size_t n,
                                   std::chrono::milliseconds deadline) const {
  return state_->log.wait_for(method, n, deadline);
}
std::vector<dingtalk_send> fake_dingtalk::sends() const {
  const std::lock_guard lock(state_->mutex);
  return state_->sends;
}
bool fake_dingtalk::wait_for_sends(std::size_t n, std::chrono::milliseconds deadline) const {
  std::unique_lock lock(state_->mutex);
  return state_->sent.wait_for(lock, deadline, [&] { return state_->sends.size() >= n; });
}

dingtalk_callback_sender::dingtalk_callback_sender(std::string url, std::string app_secret)
    : url_(std::move(url)), secret_(std::move(app_secret)) {}

std::string dingtalk_callback_sender::callback_body(const message& m, std::string_view robot_code) {
  json_writer w;
  w.begin_object().key("conversationId").value(m.conversation_id);
  w.key("atUsers").begin_array().end_array();
  w.key("chatbotCorpId").value("dingfakecorp").key("chatbotUserId").value("$:LWCP_v1:$bot");
  w.key("msgId").value(m.msg_id).key("senderNick").value("Fake User").key("isAdmin").value(false);
  if (!m.sender_staff_id.empty()) {
    w.key("senderStaffId").value(m.sender_staff_id);
  }
  w.key("sessionWebhookExpiredTime").value(m.session_webhook_expires_ms);
  w.key("createAt").value(unix_ms()).key("senderCorpId").value("dingfakecorp");
  w.key("conversationType").value(m.conversation_type).key("senderId").value(m.sender_id);
  if (m.conversation_type == "2") {
    w.key("conversationTitle").value("Fake Group");
  }
  w.key("sessionWebhook").value(m.session_webhook);
  w.key("text").begin_object().key("content").value(m.text).end_object();
  w.key("robotCode").value(robot_code).key("msgtype").value(m.msgtype).end_object();
  return std::move(w).str();
}

net::http_client_request dingtalk_callback_sender::request(const std::string& body,
                                                           const delivery& how) const {
  const auto timestamp = std::to_string(how.timestamp_ms.value_or(unix_ms()));
  net::http_client_request request;
  request.method = http_method::post;
  request.url = url_;
  request.body = body;
  request.headers.push_back({"Content-Type", "application/json; charset=utf-8"});
  request.headers.push_back({std::string(net::dingtalk::timestamp_header), timestamp});
  request.headers.push_back({std::string(net::dingtalk::sign_header),
                             net::dingtalk::sign(how.wrong_secret.value_or(secret_), timestamp)});
  request.deadlines.connect = how.deadline;
  request.deadlines.first_byte = how.deadline;
  request.deadlines.total = how.deadline;
  return request;
}

expected<net::http_client_response> dingtalk_callback_sender::send(const std::string& body,
                                                                   delivery how) const {
  return blocking_fetch(request(body, how));
}

} // namespace troupe::test
