#include "support/fake_wechat.hpp"

#include <map>
#include <mutex>

#include <fmt/format.h>
#include <simdjson.h>

#include "troupe/net/channel/wechat_wire.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::test {

using net::http_method;
using net::http_response;
using net::request_context;

struct fake_wechat::state {
  wechat_flavor flavor = wechat_flavor::wecom;
  std::string app_id;
  std::string secret;
  std::chrono::seconds expires_in{7200};
  call_log log;
  fault_plan<wechat_fault> faults;

  mutable std::mutex mutex;
  mutable std::condition_variable changed;
  /// Every token issued and until when it is valid (an expired one stays, to say 42001).
  std::map<std::string, std::chrono::steady_clock::time_point> tokens;
  std::size_t issued = 0;
  std::vector<wechat_sent> sent;
  std::int64_t next_msgid = 1;
  std::function<void(std::string_view)> hook;
};

namespace {

using state_ptr = std::shared_ptr<fake_wechat::state>;

http_response errcode(std::int64_t code, std::string_view message) {
  json_writer w;
  w.begin_object().key("errcode").value(code).key("errmsg").value(message).end_object();
  return http_response::json(200, std::move(w).str());
}

http_response issue_token(const net::http_request& request, const state_ptr& st) {
  const bool wecom = st->flavor == wechat_flavor::wecom;
  const auto id = request.query_param(wecom ? "corpid" : "appid");
  const auto secret = request.query_param(wecom ? "corpsecret" : "secret");
  if (!wecom && request.query_param("grant_type") != "client_credential") {
    return errcode(40002, "invalid grant_type");
  }
  if (id != st->app_id) {
    return errcode(40013, wecom ? "invalid corpid" : "invalid appid");
  }
  if (secret != st->secret) {
    return errcode(wecom ? 40001 : 40125, "invalid credential / secret");
  }
  std::string token;
  {
    const std::lock_guard lock(st->mutex);
    token = fmt::format("ACCESS_TOKEN_{}_{}", ++st->issued, st->app_id);
    st->tokens[token] = std::chrono::steady_clock::now() + st->expires_in;
  }
  json_writer w;
  w.begin_object();
  if (wecom) {
    w.key("errcode").value(0).key("errmsg").value("ok");
  }
  w.key("access_token").value(token).key("expires_in").value(st->expires_in.count());
  return http_response::json(200, std::move(w.end_object()).str());
}

/// Whether `token` is usable now; the errcode to answer when not.
std::optional<http_response> refuse_token(const std::string& token, const state_ptr& st) {
  const std::lock_guard lock(st->mutex);
  auto it = st->tokens.find(token);
  if (token.empty()) {
    return errcode(41001, "access_token missing");
  }
  if (it == st->tokens.end()) {
    return st->flavor == wechat_flavor::wecom ? errcode(40014, "invalid access_token")
                                              : errcode(40001, "invalid credential");
  }
  if (it->second <= std::chrono::steady_clock::now()) {
    return errcode(42001, "access_token expired");
  }
  return std::nullopt;
}

http_response send_message(const net::http_request& request, const state_ptr& st) {
  const auto token = request.query_param("access_token");
  if (auto fault = st->faults.take("send")) {
    switch (fault->what) {
      case wechat_fault::kind::expire_token: {
        const std::lock_guard lock(st->mutex);
        if (auto it = st->tokens.find(token); it != st->tokens.end()) {
          it->second = std::chrono::steady_clock::now();
        }
        return errcode(42001, "access_token expired");
      }
      case wechat_fault::kind::rate_limited:
        return st->flavor == wechat_flavor::wecom
                   ? errcode(45009, "reach max api daily quota limit")
                   : errcode(45047, "out of response count limit");
      case wechat_fault::kind::server_error:
        return http_response::text(502, "<html><body>502 Bad Gateway</body></html>", "text/html");
    }
  }
  if (auto refused = refuse_token(token, st)) {
    return *refused;
  }
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(request.body).get(root) != simdjson::SUCCESS) {
    return errcode(47001, "data format error");
  }
  wechat_sent s;
  std::string_view text;
  if (root["touser"].get_string().get(text) == simdjson::SUCCESS) {
    s.touser = std::string(text);
  }
  if (root["text"]["content"].get_string().get(text) == simdjson::SUCCESS) {
    s.content = std::string(text);
  }
  std::string_view msgtype;
  if (root["msgtype"].get_string().get(msgtype) != simdjson::SUCCESS || msgtype != "text") {
    return errcode(40008, "invalid message type");
  }
  std::int64_t agentid = 0;
  if (st->flavor == wechat_flavor::wecom) {
    if (root["agentid"].get_int64().get(agentid) != simdjson::SUCCESS) {
      return errcode(40056, "invalid agentid");
    }
    s.agentid = std::to_string(agentid);
  }
  if (s.touser.empty()) {
    return errcode(40003, "invalid openid / touser");
  }
  if (s.content.empty() || s.content.size() > net::wechat::text_limit_bytes) {
    return errcode(45002, "content size out of limit");
  }
  {
    const std::lock_guard lock(st->mutex);
    s.msgid = std::to_string(st->next_msgid++);
    st->sent.push_back(s);
  }
  st->changed.notify_all();
  if (st->hook) {
    st->hook(s.content);
  }
  json_writer w;
  w.begin_object().key("errcode").value(0).key("errmsg").value("ok");
  if (st->flavor == wechat_flavor::wecom) {
    w.key("invaliduser").value("").key("msgid").value(s.msgid);
  }
  return http_response::json(200, std::move(w.end_object()).str());
}

asio::awaitable<http_response> handle(request_context& ctx, state_ptr st, std::string method) {
  auto request = ctx.request();
  auto r = method == "send" ? send_message(request, st) : issue_token(request, st);
  st->log.add({std::move(method), std::move(request.headers), request.target + "\n" + request.body,
               r.status, r.body, std::chrono::steady_clock::now()});
  co_return r;
}

/// Percent-encodes everything but RFC 3986's unreserved characters (`+` included).
std::string query_encode(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      out += fmt::format("%{:02X}", u);
    }
  }
  return out;
}

net::http_client_request make_request(net::http_method method, std::string url, std::string body,
                                      std::chrono::milliseconds deadline) {
  net::http_client_request request;
  request.method = method;
  request.url = std::move(url);
  request.body = std::move(body);
  if (!request.body.empty()) {
    request.headers = {{"Content-Type", "text/xml"}};
  }
  request.deadlines.total = deadline;
  request.deadlines.first_byte = deadline;
  request.deadlines.idle = deadline;
  return request;
}

expected<net::http_client_response> call(net::http_method method, std::string url, std::string body,
                                         std::chrono::milliseconds deadline) {
  return blocking_fetch(make_request(method, std::move(url), std::move(body), deadline));
}

} // namespace

fake_wechat::fake_wechat(wechat_flavor flavor, std::string app_id, std::string secret,
                         std::chrono::seconds expires_in)
    : state_(std::make_shared<state>()) {
  state_->flavor = flavor;
  state_->app_id = std::move(app_id);
  state_->secret = std::move(secret);
  state_->expires_in = expires_in;
  net::router routes;
  auto st = state_;
  const bool wecom = flavor == wechat_flavor::wecom;
  routes.add(http_method::get, wecom ? "/cgi-bin/gettoken" : "/cgi-bin/token",
             [st, m = token_method()](request_context& ctx) { return handle(ctx, st, m); });
  routes.add(http_method::post, wecom ? "/cgi-bin/message/send" : "/cgi-bin/message/custom/send",
             [st](request_context& ctx) { return handle(ctx, st, "send"); });
  server_ = std::make_unique<loopback_server>(std::move(routes), "fake-wechat");
}

fake_wechat::~fake_wechat() {
  server_.reset();
}

std::string fake_wechat::api_base() const {
  return server_->origin();
}

std::string fake_wechat::token_method() const {
  return state_->flavor == wechat_flavor::wecom ? "gettoken" : "token";
}

void fake_wechat::on_send(std::function<void(std::string_view)> hook) {
  const std::lock_guard lock(state_->mutex);
  state_->hook = std::move(hook);
}

void fake_wechat::fail(std::string method, wechat_fault fault, std::size_t times) {
  state_->faults.add(std::move(method), fault, times);
}

std::vector<recorded_call> fake_wechat::calls(std::string_view method) const {
  return state_->log.of(method);
}

bool fake_wechat::wait_for_calls(std::string_view method, std::size_t n,
                                 std::chrono::milliseconds deadline) const {
  return state_->log.wait_for(method, n, deadline);
}

std::vector<wechat_sent> fake_wechat::sent() const {
  const std::lock_guard lock(state_->mutex);
  return state_->sent;
}

bool fake_wechat::wait_for_sent(std::size_t n, std::chrono::milliseconds deadline) const {
  std::unique_lock lock(state_->mutex);
  return state_->changed.wait_for(lock, deadline, [&] { return state_->sent.size() >= n; });
}

std::size_t fake_wechat::tokens_issued() const {
  const std::lock_guard lock(state_->mutex);
  return state_->issued;
}

wechat_sender::wechat_sender(wechat_flavor flavor, std::string url, std::string token,
                             std::string aes_key, std::string receive_id)
    : flavor_(flavor), url_(std::move(url)), token_(std::move(token)), aes_key_(std::move(aes_key)),
      receive_id_(std::move(receive_id)) {}

expected<net::http_client_response> wechat_sender::url_check(const std::string& plain,
                                                             delivery how) const {
  const std::string timestamp = "1409659589";
  const std::string nonce = "263014780";
  const auto& token = how.wrong_token ? *how.wrong_token : token_;
  std::string echostr = plain;
  std::string query;
  if (flavor_ == wechat_flavor::wecom) {
    auto cipher = net::wechat::cipher::from_encoding_aes_key(aes_key_);
    if (!cipher) {
      return tl::unexpected(cipher.error());
    }
    auto sealed = cipher->encrypt(plain, receive_id_);
    if (!sealed) {
      return tl::unexpected(sealed.error());
    }
    echostr = *sealed;
    query = "msg_signature=" + net::wechat::signature({token, timestamp, nonce, echostr});
  } else {
    query = "signature=" + net::wechat::signature({token, timestamp, nonce});
  }
  query += "&timestamp=" + timestamp + "&nonce=" + nonce + "&echostr=" + query_encode(echostr);
  return call(net::http_method::get, url_ + "?" + query, {}, how.deadline);
}

expected<net::http_client_response> wechat_sender::send(const text_message& m, delivery how) const {
  auto made = request(m, how);
  if (!made) {
    return tl::unexpected(made.error());
  }
  return blocking_fetch(std::move(*made));
}

expected<net::http_client_request> wechat_sender::request(const text_message& m,
                                                          const delivery& how) const {
  const auto timestamp = std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                            std::chrono::system_clock::now().time_since_epoch())
                                            .count());
  const std::string nonce = "1372623149";
  const auto& token = how.wrong_token ? *how.wrong_token : token_;
  net::wechat::message message;
  message.to_user = flavor_ == wechat_flavor::wecom ? receive_id_ : "gh_fake_account";
  message.from_user = m.from_user;
  message.create_time = std::stoll(timestamp);
  message.msg_type = "text";
  message.content = m.text;
  message.msg_id = m.msg_id;
  if (flavor_ == wechat_flavor::wecom) {
    message.agent_id = m.agent_id;
  }
  const auto xml = net::wechat::encode_text_message(message);
  std::string query = "timestamp=" + timestamp + "&nonce=" + nonce;
  std::string body = xml;
  if (flavor_ == wechat_flavor::official_account) {
    query += "&signature=" + net::wechat::signature({token, timestamp, nonce}) +
             "&openid=" + query_encode(m.from_user);
  }
  if (!aes_key_.empty()) {
    auto cipher = net::wechat::cipher::from_encoding_aes_key(aes_key_);
    if (!cipher) {
      return tl::unexpected(cipher.error());
    }
    auto sealed = cipher->encrypt(xml, receive_id_);
    if (!sealed) {
      return tl::unexpected(sealed.error());
    }
    body = net::wechat::encode_encrypted_body(message.to_user, *sealed,
                                              flavor_ == wechat_flavor::wecom ? m.agent_id : "");
    query += "&msg_signature=" + net::wechat::signature({token, timestamp, nonce, *sealed});
    if (flavor_ == wechat_flavor::official_account) {
      query += "&encrypt_type=aes";
    }
  }
  return make_request(net::http_method::post, url_ + "?" + query, std::move(body), how.deadline);
}

} // namespace troupe::test
