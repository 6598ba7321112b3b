#include "support/fake_slack.hpp"

#include <algorithm>
#include <mutex>

#include <fmt/format.h>
#include <simdjson.h>

#include "troupe/net/channel/slack_wire.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::test {

using net::http_method;
using net::http_response;
using net::request_context;

struct fake_slack::state {
  std::string token;
  std::string user_id;
  call_log log;
  fault_plan<slack_fault> faults;

  mutable std::mutex mutex;
  mutable std::condition_variable posted;
  std::vector<slack_post> posts;
  std::int64_t ts_seconds = 0;
  std::int64_t ts_counter = 0;
  std::function<void(std::string_view)> hook;
};

namespace {

using state_ptr = std::shared_ptr<fake_slack::state>;

http_response slack_error(std::string_view word) {
  json_writer w;
  w.begin_object().key("ok").value(false).key("error").value(word).end_object();
  return http_response::json(200, std::move(w).str());
}

http_response fault_answer(const slack_fault& f) {
  switch (f.what) {
    case slack_fault::kind::rate_limited: {
      auto r = http_response::json(429, R"({"ok":false,"error":"ratelimited"})");
      r.headers.push_back({"Retry-After", std::to_string(f.retry_after)});
      return r;
    }
    case slack_fault::kind::server_error:
      return http_response::text(500, "<html><body>500 Internal Server Error</body></html>",
                                 "text/html");
    case slack_fault::kind::error_word:
      return slack_error(f.error);
  }
  return slack_error("internal_error");
}

/// The arguments of a call: a JSON object, or a form (application/x-www-form-urlencoded).
struct arguments {
  std::vector<std::pair<std::string, std::string>> fields;

  static std::optional<arguments> read(const net::http_request& request) {
    arguments out;
    if (request.body.empty()) {
      return out;
    }
    if (request.header("Content-Type").starts_with("application/x-www-form-urlencoded")) {
      std::string_view rest = request.body;
      while (!rest.empty()) {
        const auto amp = rest.find('&');
        const auto pair = rest.substr(0, amp);
        const auto eq = pair.find('=');
        out.fields.emplace_back(net::percent_decode(pair.substr(0, eq), true),
                                eq == std::string_view::npos
                                    ? std::string()
                                    : net::percent_decode(pair.substr(eq + 1), true));
        rest = amp == std::string_view::npos ? std::string_view{} : rest.substr(amp + 1);
      }
      return out;
    }
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    simdjson::dom::object object;
    if (parser.parse(request.body).get(root) != simdjson::SUCCESS ||
        root.get_object().get(object) != simdjson::SUCCESS) {
      return std::nullopt;
    }
    for (auto field : object) {
      std::string_view text;
      if (field.value.get_string().get(text) == simdjson::SUCCESS) {
        out.fields.emplace_back(std::string(field.key), std::string(text));
      }
    }
    return out;
  }
  std::string get(std::string_view key) const {
    for (const auto& [k, v] : fields) {
      if (k == key) {
        return v;
      }
    }
    return {};
  }
};

std::string next_ts(const state_ptr& st) {
  // Called with st->mutex held.
  return fmt::format("{}.{:06}", st->ts_seconds, ++st->ts_counter);
}

std::string message_json(const fake_slack::state& st, const slack_post& p) {
  json_writer w;
  w.begin_object().key("type").value("message").key("text").value(p.text);
  w.key("user").value(st.user_id).key("bot_id").value("B0FAKEBOT").key("ts").value(p.ts);
  if (!p.thread_ts.empty()) {
    w.key("thread_ts").value(p.thread_ts);
  }
  return std::move(w.end_object()).str();
}

http_response ok_message(const fake_slack::state& st, const slack_post& p) {
  json_writer w;
  w.begin_object().key("ok").value(true).key("channel").value(p.channel).key("ts").value(p.ts);
  w.key("message").raw(message_json(st, p));
  return http_response::json(200, std::move(w.end_object()).str());
}

http_response post_message(const arguments& args, const state_ptr& st) {
  slack_post p{args.get("channel"), args.get("text"), args.get("thread_ts"), {}, 0};
  if (p.channel.empty()) {
    return slack_error("channel_not_found");
  }
  if (p.text.empty()) {
    return slack_error("no_text");
  }
  if (p.text.size() > 40'000) {
    return slack_error("msg_too_long");
  }
  {
    const std::lock_guard lock(st->mutex);
    p.ts = next_ts(st);
    st->posts.push_back(p);
  }
  st->posted.notify_all();
  if (st->hook) {
    st->hook(p.text);
  }
  return ok_message(*st, p);
}

http_response update_message(const arguments& args, const state_ptr& st) {
  const auto channel = args.get("channel");
  const auto ts = args.get("ts");
  const auto text = args.get("text");
  if (channel.empty()) {
    return slack_error("channel_not_found");
  }
  if (text.empty()) {
    return slack_error("no_text");
  }
  slack_post p;
  {
    const std::lock_guard lock(st->mutex);
    auto it = std::find_if(st->posts.begin(), st->posts.end(),
                           [&](const slack_post& s) { return s.channel == channel && s.ts == ts; });
    if (it == st->posts.end()) {
      return slack_error("message_not_found");
    }
    it->text = text;
    ++it->updates;
    p = *it;
  }
  st->posted.notify_all();
  return ok_message(*st, p);
}

http_response answer(const std::string& method, const net::http_request& request,
                     const state_ptr& st) {
  if (auto fault = st->faults.take(method)) {
    return fault_answer(*fault);
  }
  const auto args = arguments::read(request);
  if (!args) {
    return slack_error("invalid_json");
  }
  auto token = std::string(request.header("Authorization"));
  if (token.starts_with("Bearer ")) {
    token.erase(0, 7);
  } else {
    token = args->get("token");
  }
  if (token.empty()) {
    return slack_error("not_authed");
  }
  if (token != st->token) {
    return slack_error("invalid_auth");
  }
  if (method == "auth.test") {
    json_writer w;
    w.begin_object().key("ok").value(true).key("url").value("https://fake.slack.com/");
    w.key("team").value("Fake").key("user").value("fakebot").key("team_id").value("T0TEST");
    w.key("user_id").value(st->user_id).key("bot_id").value("B0FAKEBOT");
    return http_response::json(200, std::move(w.end_object()).str());
  }
  if (method == "chat.postMessage") {
    return post_message(*args, st);
  }
  if (method == "chat.update") {
    return update_message(*args, st);
  }
  return slack_error("unknown_method");
}

asio::awaitable<http_response> handle(request_context& ctx, state_ptr st) {
  auto method = std::string(ctx.param("method"));
  auto request = ctx.request();
  auto r = answer(method, request, st);
  st->log.add({std::move(method), std::move(request.headers), std::move(request.body), r.status,
               r.body, std::chrono::steady_clock::now()});
  co_return r;
}

} // namespace

fake_slack::fake_slack(std::string bot_token, std::string bot_user_id)
    : state_(std::make_shared<state>()) {
  state_->token = std::move(bot_token);
  state_->user_id = std::move(bot_user_id);
  state_->ts_seconds = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  net::router routes;
  auto st = state_;
  routes.add(http_method::post, "/api/{method}",
             [st](request_context& ctx) { return handle(ctx, st); });
  server_ = std::make_unique<loopback_server>(std::move(routes), "fake-slack");
}

fake_slack::~fake_slack() {
  server_.reset();
}

std::string fake_slack::api_base() const {
  return server_->origin() + "/api";
}
const std::string& fake_slack::bot_token() const noexcept {
  return state_->token;
}
const std::string& fake_slack::bot_user_id() const noexcept {
  return state_->user_id;
}

void fake_slack::on_send(std::function<void(std::string_view)> hook) {
  const std::lock_guard lock(state_->mutex);
  state_->hook = std::move(hook);
}
void fake_slack::fail(std::string method, slack_fault fault, std::size_t times) {
  state_->faults.add(std::move(method), std::move(fault), times);
}
void fake_slack::fail_always(std::string method, slack_fault fault) {
  fail(std::move(method), std::move(fault), fault_plan<slack_fault>::always);
}
void fake_slack::clear_faults() {
  state_->faults.clear();
}

std::vector<recorded_call> fake_slack::calls() const {
  return state_->log.all();
}
std::vector<recorded_call> fake_slack::calls(std::string_view method) const {
  return state_->log.of(method);
}
bool fake_slack::wait_for_calls(std::string_view method, std::size_t n,
                                std::chrono::milliseconds deadline) const {
  return state_->log.wait_for(method, n, deadline);
}
std::vector<slack_post> fake_slack::posts() const {
  const std::lock_guard lock(state_->mutex);
  return state_->posts;
}
bool fake_slack::wait_for_posts(std::size_t n, std::chrono::milliseconds deadline) const {
  std::unique_lock lock(state_->mutex);
  return state_->posted.wait_for(lock, deadline, [&] { return state_->posts.size() >= n; });
}

slack_event_sender::slack_event_sender(std::string signing_secret, std::string url)
    : secret_(std::move(signing_secret)), url_(std::move(url)) {}

std::string slack_event_sender::event_body(const message& m, std::string_view team_id,
                                           std::string_view app_id) {
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  json_writer w;
  w.begin_object().key("token").value("fake-verification-token").key("team_id").value(team_id);
  w.key("api_app_id").value(app_id);
  w.key("event").begin_object().key("type").value(m.type);
  if (!m.subtype.empty()) {
    w.key("subtype").value(m.subtype);
  }
  w.key("channel").value(m.channel);
  if (!m.user.empty()) {
    w.key("user").value(m.user);
  }
  if (!m.bot_id.empty()) {
    w.key("bot_id").value(m.bot_id);
  }
  w.key("text").value(m.text).key("ts").value(m.ts).key("event_ts").value(m.ts);
  if (!m.thread_ts.empty()) {
    w.key("thread_ts").value(m.thread_ts);
  }
  if (m.type == "message") {
    w.key("channel_type").value(m.channel_type);
  }
  w.end_object();
  w.key("type").value("event_callback").key("event_id").value(m.event_id);
  w.key("event_time").value(static_cast<std::int64_t>(now));
  w.key("authorizations")
      .begin_array()
      .begin_object()
      .key("team_id")
      .value(team_id)
      .key("user_id")
      .value("U0FAKEBOT")
      .key("is_bot")
      .value(true)
      .end_object()
      .end_array();
  return std::move(w.end_object()).str();
}

std::string slack_event_sender::url_verification_body(std::string_view challenge) {
  json_writer w;
  w.begin_object().key("token").value("fake-verification-token").key("challenge").value(challenge);
  w.key("type").value("url_verification");
  return std::move(w.end_object()).str();
}

namespace {

/// `text` percent-encoded for a form body (RFC 3986 unreserved kept, space as `+`).
std::string form_encode(std::string_view text) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : text) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else if (c == ' ') {
      out += '+';
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

} // namespace

std::string slack_event_sender::slash_command_body(const slash_command& c) {
  const std::pair<std::string_view, std::string> fields[] = {
      {"token", "fake-verification-token"},
      {"team_id", c.team_id},
      {"team_domain", "fake"},
      {"channel_id", c.channel_id},
      {"channel_name", "general"},
      {"user_id", c.user_id},
      {"user_name", "tester"},
      {"command", c.command},
      {"text", c.text},
      {"api_app_id", "A0TEST"},
      {"is_enterprise_install", "false"},
      {"response_url", "https://hooks.slack.com/commands/T0TEST/1/" + c.trigger_id},
      {"trigger_id", c.trigger_id},
  };
  std::string body;
  for (const auto& [key, value] : fields) {
    if (!body.empty()) {
      body += '&';
    }
    body += std::string(key) + '=' + form_encode(value);
  }
  return body;
}

expected<net::http_client_response> slack_event_sender::send(const slash_command& c,
                                                             delivery how) const {
  how.content_type = "application/x-www-form-urlencoded";
  return send(slash_command_body(c), std::move(how));
}

expected<net::http_client_response> slack_event_sender::send(const std::string& body,
                                                             delivery how) const {
  return blocking_fetch(request(body, how));
}

net::http_client_request slack_event_sender::request(const std::string& body,
                                                     const delivery& how) const {
  const auto timestamp =
      std::to_string(how.timestamp.value_or(std::chrono::duration_cast<std::chrono::seconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count()));
  net::http_client_request request;
  request.method = http_method::post;
  request.url = url_;
  request.body = body;
  request.headers.push_back({"Content-Type", how.content_type});
  request.headers.push_back({std::string(net::slack::timestamp_header), timestamp});
  request.headers.push_back(
      {std::string(net::slack::signature_header),
       net::slack::sign(how.wrong_secret.value_or(secret_), timestamp, body)});
  if (how.retry_num > 0) {
    request.headers.push_back(
        {std::string(net::slack::retry_num_header), std::to_string(how.retry_num)});
    request.headers.push_back({std::string(net::slack::retry_reason_header), "http_timeout"});
  }
  request.deadlines.connect = how.deadline;
  request.deadlines.first_byte = how.deadline;
  request.deadlines.total = how.deadline;
  return request;
}

} // namespace troupe::test
