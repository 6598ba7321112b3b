#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "support/fake_slack.hpp"
#include "troupe/net/channel/slack_wire.hpp"

using namespace troupe;
using namespace troupe::test;
using namespace std::chrono_literals;
namespace slack = troupe::net::slack;

namespace {

net::http_client_response call(const fake_slack& fake, std::string_view method, std::string body,
                               std::string token = "default", bool form = false) {
  net::http_client_request request;
  request.method = net::http_method::post;
  request.url = slack::method_url(fake.api_base(), method);
  request.headers.push_back({"Content-Type", form ? "application/x-www-form-urlencoded"
                                                  : "application/json; charset=utf-8"});
  if (token == "default") {
    token = fake.bot_token();
  }
  if (!token.empty()) {
    request.headers.push_back({"Authorization", "Bearer " + token});
  }
  request.body = std::move(body);
  request.deadlines.total = 30s;
  auto answer = blocking_fetch(std::move(request));
  REQUIRE(answer);
  return std::move(*answer);
}

slack::answer classified(const net::http_client_response& r) {
  return slack::classify_answer(r.status, r.header("Retry-After"), r.body);
}

slack_event_sender::message user_message(std::string event_id, std::string text, std::string ts) {
  slack_event_sender::message m;
  m.event_id = std::move(event_id);
  m.channel = "C1";
  m.user = "U1";
  m.text = std::move(text);
  m.ts = std::move(ts);
  return m;
}

slack_event_sender::delivery how(unsigned retry_num, std::optional<std::string> wrong_secret = {},
                                 std::optional<std::int64_t> timestamp = {}) {
  slack_event_sender::delivery d;
  d.retry_num = retry_num;
  d.wrong_secret = std::move(wrong_secret);
  d.timestamp = timestamp;
  return d;
}

} // namespace

TEST_CASE("fake slack: chat.postMessage posts in the thread and answers its ts",
          "[net][slack][fake]") {
  fake_slack fake;
  const auto posted = classified(
      call(fake, "chat.postMessage", slack::encode_post_message("C1", "hi", "17.000200")));
  REQUIRE(posted.ok());
  CHECK(posted.channel == "C1");
  CHECK_FALSE(posted.ts.empty());
  REQUIRE(fake.posts().size() == 1);
  CHECK(fake.posts()[0].thread_ts == "17.000200");
  CHECK(fake.posts()[0].ts == posted.ts);
  CHECK(fake.posts()[0].text == "hi");

  const auto second =
      classified(call(fake, "chat.postMessage", "channel=C2&text=a+b%21", "default", true));
  REQUIRE(second.ok());
  CHECK(second.ts != posted.ts);
  CHECK(fake.posts()[1].text == "a b!");
  CHECK(fake.wait_for_posts(2, 1s));
}

TEST_CASE("fake slack: auth failures and refusals are HTTP 200 with ok false",
          "[net][slack][fake]") {
  fake_slack fake;
  const auto none = call(fake, "chat.postMessage", slack::encode_post_message("C1", "x"), "");
  CHECK(none.status == 200);
  CHECK(classified(none).error == "not_authed");
  CHECK(classified(none).kind == slack::answer_kind::unauthorized);
  CHECK(classified(call(fake, "chat.postMessage", slack::encode_post_message("C1", "x"), "xoxb-no"))
            .error == "invalid_auth");
  CHECK(classified(call(fake, "chat.postMessage", R"({"text":"x"})")).error == "channel_not_found");
  const auto empty = classified(call(fake, "chat.postMessage", R"({"channel":"C1"})"));
  CHECK(empty.error == "no_text");
  CHECK(empty.kind == slack::answer_kind::permanent);
  CHECK(classified(call(fake, "chat.fly", "{}")).error == "unknown_method");
  const auto me = call(fake, "auth.test", "{}");
  CHECK(classified(me).ok());
  CHECK(me.body.find("\"user_id\":\"U0FAKEBOT\"") != std::string::npos);
  CHECK(fake.posts().empty());
}

TEST_CASE("fake slack: a 429 carries Retry-After, a 500 is a server error, then posts work",
          "[net][slack][fake]") {
  fake_slack fake;
  fake.fail("chat.postMessage", {slack_fault::kind::rate_limited, 5, {}});
  fake.fail("chat.postMessage", {slack_fault::kind::server_error, 1, {}});
  const auto limited = call(fake, "chat.postMessage", slack::encode_post_message("C1", "x"));
  CHECK(limited.status == 429);
  CHECK(limited.header("Retry-After") == "5");
  CHECK(classified(limited).kind == slack::answer_kind::rate_limited);
  CHECK(classified(limited).retry_after == 5s);
  CHECK(classified(call(fake, "chat.postMessage", slack::encode_post_message("C1", "x"))).kind ==
        slack::answer_kind::server_error);
  CHECK(classified(call(fake, "chat.postMessage", slack::encode_post_message("C1", "x"))).ok());
  fake.fail("chat.postMessage", {slack_fault::kind::error_word, 0, "not_in_channel"}, 2);
  CHECK(classified(call(fake, "chat.postMessage", slack::encode_post_message("C1", "x"))).error ==
        "not_in_channel");
  CHECK(fake.posts().size() == 1);
  CHECK(fake.calls("chat.postMessage").size() == 4);
}

TEST_CASE("fake slack: chat.update changes a posted message", "[net][slack][fake]") {
  fake_slack fake;
  const auto posted =
      classified(call(fake, "chat.postMessage", slack::encode_post_message("C1", "draft")));
  REQUIRE(posted.ok());
  CHECK(
      classified(call(fake, "chat.update", slack::encode_update_message("C1", posted.ts, "final")))
          .ok());
  CHECK(
      classified(call(fake, "chat.update", slack::encode_update_message("C1", "1.1", "x"))).error ==
      "message_not_found");
  REQUIRE(fake.posts().size() == 1);
  CHECK(fake.posts()[0].text == "final");
  CHECK(fake.posts()[0].updates == 1);
}

namespace {

/// An Events API endpoint as an adapter would run it: signature first, then the body.
struct events_endpoint {
  call_log received;
  std::unique_ptr<loopback_server> server;

  explicit events_endpoint(std::string secret) {
    net::router routes;
    routes.add(net::http_method::post, "/events",
               [this, secret](net::request_context& ctx) { return handle(ctx, secret); });
    server = std::make_unique<loopback_server>(std::move(routes), "events");
  }
  std::string url() const {
    return server->origin() + "/events";
  }

private:
  asio::awaitable<net::http_response> handle(net::request_context& ctx, std::string secret) {
    const auto& r = ctx.request();
    const auto check = slack::verify_signature(secret, r.header(slack::timestamp_header),
                                               r.header(slack::signature_header), r.body,
                                               std::chrono::system_clock::now());
    auto answer = net::http_response::json(401, "{}");
    if (check == slack::signature_check::valid) {
      const auto e = slack::decode_envelope(r.body, "U0FAKEBOT");
      answer = !e ? net::http_response::json(400, "{}")
               : e->type == slack::envelope::kind::url_verification
                   ? net::http_response::json(200, slack::encode_challenge_answer(e->challenge))
                   : net::http_response::json(200, "{}");
    }
    received.add({std::string(slack::to_string(check)), r.headers, r.body, answer.status,
                  answer.body, std::chrono::steady_clock::now()});
    co_return answer;
  }
};

} // namespace

TEST_CASE("slack event sender: signed deliveries verify, forged and stale ones do not",
          "[net][slack][fake]") {
  events_endpoint endpoint("shh-signing-secret");
  const slack_event_sender sender("shh-signing-secret", endpoint.url());

  const auto body =
      slack_event_sender::event_body(user_message("Ev01", "hello", "1700000000.000100"));
  const auto first = sender.send(body);
  REQUIRE(first);
  CHECK(first->status == 200);
  const auto redelivered = sender.send(body, how(1));
  REQUIRE(redelivered);
  CHECK(redelivered->status == 200);
  const auto forged = sender.send(body, how(0, "guess"));
  REQUIRE(forged);
  CHECK(forged->status == 401);
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  const auto stale = sender.send(body, how(0, {}, now - 400));
  REQUIRE(stale);
  CHECK(stale->status == 401);

  const auto calls = endpoint.received.all();
  REQUIRE(calls.size() == 4);
  CHECK(calls[0].method == "valid");
  CHECK(calls[1].header(slack::retry_num_header) == "1");
  CHECK(calls[1].header(slack::retry_reason_header) == "http_timeout");
  CHECK(calls[2].method == "mismatch");
  CHECK(calls[3].method == "stale");
  const auto decoded = slack::decode_envelope(calls[0].body);
  REQUIRE(decoded);
  REQUIRE(decoded->message);
  CHECK(decoded->message->event_id == "Ev01");
  CHECK(decoded->message->text == "hello");
  CHECK(slack::thread_key(*decoded->message) == "C1:1700000000.000100");
}

TEST_CASE("slack event sender: url_verification is answered with the challenge",
          "[net][slack][fake]") {
  events_endpoint endpoint("s");
  const slack_event_sender sender("s", endpoint.url());
  const auto answer = sender.send(slack_event_sender::url_verification_body("ch4ll3nge"));
  REQUIRE(answer);
  CHECK(answer->status == 200);
  CHECK(answer->body == R"({"challenge":"ch4ll3nge"})");
}

TEST_CASE("slack event sender: bot messages are built as Slack sends them", "[net][slack][fake]") {
  slack_event_sender::message m;
  m.event_id = "Ev02";
  m.ts = "1.2";
  m.user.clear();
  m.bot_id = "B9";
  m.subtype = "bot_message";
  m.text = "echo";
  const auto e = slack::decode_envelope(slack_event_sender::event_body(m));
  REQUIRE(e);
  REQUIRE(e->message);
  CHECK(e->message->ignored);
  CHECK(e->message->ignore_reason == "bot_id");
}
