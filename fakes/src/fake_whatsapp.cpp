#include "support/fake_whatsapp.hpp"

#include <mutex>

#include <fmt/format.h>
#include <simdjson.h>

#include "troupe/runtime/channel/text.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::test {

using net::http_method;
using net::http_response;
using net::request_context;

struct fake_whatsapp::state {
  std::string phone_number_id;
  std::string token;
  call_log log;
  fault_plan<whatsapp_fault> faults;

  mutable std::mutex mutex;
  mutable std::condition_variable changed;
  std::vector<whatsapp_sent> sent;
  std::int64_t next_id = 1;
  std::function<void(std::string_view)> hook;
};

namespace {

using state_ptr = std::shared_ptr<fake_whatsapp::state>;

http_response graph_error(unsigned status, std::int64_t code, std::string_view type,
                          std::string_view message) {
  json_writer w;
  w.begin_object().key("error").begin_object();
  w.key("message").value(message).key("type").value(type).key("code").value(code);
  w.key("fbtrace_id").value("AbCdEfFakeTrace").end_object();
  return http_response::json(status, std::move(w.end_object()).str());
}

http_response expired() {
  return graph_error(401, 190, "OAuthException",
                     "Error validating access token: Session has expired");
}

http_response send_message(const net::http_request& request, std::string_view phone,
                           const state_ptr& st) {
  if (auto fault = st->faults.take("messages")) {
    switch (fault->what) {
      case whatsapp_fault::kind::expire_token:
        return expired();
      case whatsapp_fault::kind::rate_limited:
        return graph_error(400, 130429, "OAuthException", "Rate limit hit");
      case whatsapp_fault::kind::pair_rate_limited:
        return graph_error(400, 131056, "OAuthException",
                           "(Business Account, Consumer Account) pair rate limit hit");
      case whatsapp_fault::kind::window_closed:
        return graph_error(400, 131047, "OAuthException",
                           "Re-engagement message: more than 24 hours have passed since the "
                           "recipient last replied to the sender number");
      case whatsapp_fault::kind::server_error:
        return graph_error(500, 131000, "OAuthException", "Something went wrong");
    }
  }
  if (request.header("Authorization") != "Bearer " + st->token) {
    return expired();
  }
  if (phone != st->phone_number_id) {
    return graph_error(400, 100, "GraphMethodException",
                       "Unsupported post request. Object with ID does not exist");
  }
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(request.body).get(root) != simdjson::SUCCESS) {
    return graph_error(400, 100, "OAuthException", "Invalid parameter");
  }
  std::string_view product;
  std::string_view type;
  std::string_view to;
  std::string_view body;
  if (root["messaging_product"].get_string().get(product) != simdjson::SUCCESS ||
      product != "whatsapp") {
    return graph_error(400, 100, "OAuthException",
                       "(#100) The parameter messaging_product is required.");
  }
  if (root["type"].get_string().get(type) != simdjson::SUCCESS || type != "text" ||
      root["to"].get_string().get(to) != simdjson::SUCCESS ||
      root["text"]["body"].get_string().get(body) != simdjson::SUCCESS) {
    return graph_error(400, 100, "OAuthException", "(#100) Invalid parameter");
  }
  if (troupe::channel::message_length(body) > 4096) {
    return graph_error(400, 100, "OAuthException",
                       "(#100) Param text['body'] must be at most 4096 characters long.");
  }
  whatsapp_sent s{std::string(to), std::string(body), {}};
  {
    const std::lock_guard lock(st->mutex);
    s.id = fmt::format("wamid.FAKE{:08}", st->next_id++);
    st->sent.push_back(s);
  }
  st->changed.notify_all();
  if (st->hook) {
    st->hook(s.body);
  }
  json_writer w;
  w.begin_object().key("messaging_product").value("whatsapp");
  w.key("contacts").begin_array().begin_object().key("input").value(s.to).key("wa_id").value(s.to);
  w.end_object().end_array();
  w.key("messages").begin_array().begin_object().key("id").value(s.id).end_object().end_array();
  return http_response::json(200, std::move(w.end_object()).str());
}

asio::awaitable<http_response> handle(request_context& ctx, state_ptr st) {
  auto request = ctx.request();
  auto r = send_message(request, ctx.param("phone"), st);
  st->log.add({"messages", std::move(request.headers), std::move(request.body), r.status, r.body,
               std::chrono::steady_clock::now()});
  co_return r;
}

std::int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string envelope(std::string_view phone, const std::function<void(json_writer&)>& value) {
  json_writer w;
  w.begin_object().key("object").value("whatsapp_business_account");
  w.key("entry").begin_array().begin_object().key("id").value("102290129340398");
  w.key("changes").begin_array().begin_object().key("field").value("messages");
  w.key("value").begin_object().key("messaging_product").value("whatsapp");
  w.key("metadata").begin_object().key("display_phone_number").value("15550783881");
  w.key("phone_number_id").value(phone).end_object();
  value(w);
  w.end_object().end_object().end_array().end_object().end_array();
  return std::move(w.end_object()).str();
}

} // namespace

fake_whatsapp::fake_whatsapp(std::string phone_number_id, std::string access_token)
    : state_(std::make_shared<state>()) {
  state_->phone_number_id = std::move(phone_number_id);
  state_->token = std::move(access_token);
  net::router routes;
  auto st = state_;
  routes.add(http_method::post, "/v21.0/{phone}/messages",
             [st](request_context& ctx) { return handle(ctx, st); });
  server_ = std::make_unique<loopback_server>(std::move(routes), "fake-whatsapp");
}

fake_whatsapp::~fake_whatsapp() {
  server_.reset();
}

std::string fake_whatsapp::api_base() const {
  return server_->origin() + "/v21.0";
}

void fake_whatsapp::on_send(std::function<void(std::string_view)> hook) {
  const std::lock_guard lock(state_->mutex);
  state_->hook = std::move(hook);
}

void fake_whatsapp::fail(whatsapp_fault fault, std::size_t times) {
  state_->faults.add("messages", fault, times);
}

std::vector<recorded_call> fake_whatsapp::calls() const {
  return state_->log.of("messages");
}

bool fake_whatsapp::wait_for_calls(std::size_t n, std::chrono::milliseconds deadline) const {
  return state_->log.wait_for("messages", n, deadline);
}

std::vector<whatsapp_sent> fake_whatsapp::sent() const {
  const std::lock_guard lock(state_->mutex);
  return state_->sent;
}

bool fake_whatsapp::wait_for_sent(std::size_t n, std::chrono::milliseconds deadline) const {
  std::unique_lock lock(state_->mutex);
  return state_->changed.wait_for(lock, deadline, [&] { return state_->sent.size() >= n; });
}

whatsapp_sender::whatsapp_sender(std::string url, std::string app_secret,
                                 std::string phone_number_id)
    : url_(std::move(url)), secret_(std::move(app_secret)),
      phone_number_id_(std::move(phone_number_id)) {}

std::string whatsapp_sender::message_body(const text_message& m, std::string_view phone_number_id) {
  return envelope(phone_number_id, [&](json_writer& w) {
    w.key("contacts").begin_array().begin_object().key("profile").begin_object();
    w.key("name").value("Kerry Fisher").end_object().key("wa_id").value(m.from);
    w.end_object().end_array();
    w.key("messages").begin_array().begin_object().key("from").value(m.from);
    w.key("id")
        .value(m.id)
        .key("timestamp")
        .value(std::to_string(m.timestamp.value_or(now_seconds())));
    w.key("text").begin_object().key("body").value(m.text).end_object();
    w.key("type").value("text").end_object().end_array();
  });
}

std::string whatsapp_sender::status_body(std::string_view id, std::string_view phone_number_id) {
  return envelope(phone_number_id, [&](json_writer& w) {
    w.key("statuses").begin_array().begin_object().key("id").value(id);
    w.key("status").value("delivered").key("timestamp").value(std::to_string(now_seconds()));
    w.key("recipient_id").value("16315551234").end_object().end_array();
  });
}

expected<net::http_client_response> whatsapp_sender::send(const std::string& body,
                                                          delivery how) const {
  return blocking_fetch(request(body, how));
}

net::http_client_request whatsapp_sender::request(const std::string& body,
                                                  const delivery& how) const {
  const auto& secret = how.wrong_secret ? *how.wrong_secret : secret_;
  net::http_client_request request;
  request.method = http_method::post;
  request.url = url_;
  request.body = body;
  request.headers = {{"Content-Type", "application/json"},
                     {"X-Hub-Signature-256", "sha256=" + to_hex(hmac_sha256(secret, body))}};
  request.deadlines.total = how.deadline;
  request.deadlines.first_byte = how.deadline;
  request.deadlines.idle = how.deadline;
  return request;
}

expected<net::http_client_response> whatsapp_sender::subscribe(const std::string& verify_token,
                                                               const std::string& challenge) const {
  net::http_client_request request;
  request.method = http_method::get;
  request.url =
      url_ + "?hub.mode=subscribe&hub.verify_token=" + verify_token + "&hub.challenge=" + challenge;
  return blocking_fetch(std::move(request));
}

} // namespace troupe::test
