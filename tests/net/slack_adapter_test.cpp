#include <chrono>
#include <string>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "support/fake_slack.hpp"
#include "support/run_until_done.hpp"
#include "troupe/net/channel/slack_adapter.hpp"

// g++ 12 at -O2 reports -Wmismatched-new-delete for Asio coroutine frames it inlines: a
// known false positive (awaitable_frame_base pairs its own operator new and delete).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

using namespace troupe;
using namespace troupe::net;
using namespace troupe::net::channel;
using namespace std::chrono_literals;
using troupe::test::fake_slack;
using troupe::test::run_until_done;
using troupe::test::slack_event_sender;
using troupe::test::slack_fault;

namespace {

constexpr auto secret = "signing-secret-1";

slack_options options_for(std::string api_base = "http://127.0.0.1:1/api",
                          std::string bot_token = "xoxb-1") {
  slack_options o;
  o.channel = "team";
  o.bot_token = std::move(bot_token);
  o.signing_secret = secret;
  o.api_base = std::move(api_base);
  return o;
}

std::string now_seconds(std::chrono::seconds shift = 0s) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                            (std::chrono::system_clock::now() + shift).time_since_epoch())
                            .count());
}

http_request signed_request(const std::string& body, const std::string& timestamp,
                            const std::string& signing = secret) {
  http_request r;
  r.method = http_method::post;
  r.path = "/api/v1/webhooks/channels/team";
  r.headers.push_back({"X-Slack-Request-Timestamp", timestamp});
  r.headers.push_back({"X-Slack-Signature", slack::sign(signing, timestamp, body)});
  r.body = body;
  return r;
}

slack_event_sender::message event(std::string id, std::string text, std::string ts) {
  slack_event_sender::message m;
  m.event_id = std::move(id);
  m.text = std::move(text);
  m.ts = std::move(ts);
  return m;
}

outbound_part part_of(std::string reply_to, std::string text) {
  outbound_part p;
  p.reply_to = std::move(reply_to);
  p.run_id = "run-1";
  p.text = std::move(text);
  return p;
}

} // namespace

TEST_CASE("the slack adapter verifies v0 signatures within five minutes",
          "[net][channels][slack]") {
  const auto adapter = std::make_shared<slack_adapter>(options_for());
  const std::string body = slack_event_sender::event_body(event("Ev1", "hi", "1.000001"));
  CHECK(adapter->verify(signed_request(body, now_seconds())));
  CHECK(adapter->verify(signed_request(body, now_seconds(-240s))));
  for (const auto& bad :
       {signed_request(body, now_seconds(), "another-secret"),
        signed_request(body, now_seconds(-360s)), signed_request(body, now_seconds(360s)),
        signed_request(body, "not-a-time")}) {
    auto refused = adapter->verify(bad);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == errc::permission_denied);
  }
  // The signature covers the body: another body under the same headers fails.
  auto tampered = signed_request(body, now_seconds());
  tampered.body += " ";
  CHECK_FALSE(adapter->verify(tampered));
  http_request unsigned_request;
  unsigned_request.body = body;
  CHECK_FALSE(adapter->verify(unsigned_request));
}

TEST_CASE("the slack adapter decodes messages, mentions and the challenge",
          "[net][channels][slack]") {
  const auto adapter = std::make_shared<slack_adapter>(options_for());
  auto challenge =
      adapter->decode(signed_request(slack_event_sender::url_verification_body("abc"), "0"));
  REQUIRE(challenge);
  CHECK(challenge->messages.empty());
  CHECK(challenge->response_body == R"({"challenge":"abc"})");

  auto plain = adapter->decode(
      signed_request(slack_event_sender::event_body(event("Ev1", "hi", "10.000100")), "0"));
  REQUIRE(plain);
  REQUIRE(plain->messages.size() == 1);
  const auto& m = plain->messages[0];
  CHECK(m.message_id == "C0TEST:10.000100"); // channel + ts: also the app_mention's key
  CHECK(m.thread == "C0TEST:10.000100");
  CHECK(m.sender == "U0USER");
  CHECK(m.text == "hi");
  CHECK(m.reply_to == "C0TEST:10.000100");
  // The event id is the second dedupe key.
  CHECK(m.delivery_id == "event:Ev1");

  auto reply = event("Ev2", "more", "11.000200");
  reply.thread_ts = "10.000100";
  reply.type = "app_mention";
  auto in_thread = adapter->decode(signed_request(slack_event_sender::event_body(reply), "0"));
  REQUIRE(in_thread);
  REQUIRE(in_thread->messages.size() == 1);
  CHECK(in_thread->messages[0].message_id == "C0TEST:11.000200");
  CHECK(in_thread->messages[0].thread == "C0TEST:10.000100");
  CHECK(in_thread->messages[0].reply_to == "C0TEST:10.000100");

  // Bots, edits and deletions give no message.
  auto bot = event("Ev3", "hi", "12.0");
  bot.bot_id = "B1";
  auto edit = event("Ev4", "hi", "13.0");
  edit.subtype = "message_changed";
  auto gone = event("Ev5", "", "14.0");
  gone.subtype = "message_deleted";
  for (const auto& skipped : {bot, edit, gone}) {
    auto decoded = adapter->decode(signed_request(slack_event_sender::event_body(skipped), "0"));
    REQUIRE(decoded);
    CHECK(decoded->messages.empty());
  }
  auto bad = adapter->decode(signed_request("[1,2]", "0"));
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == errc::invalid_argument);
}

TEST_CASE("slack_inbound strips the bot's mention and drops its own messages",
          "[net][channels][slack]") {
  auto mention = slack::decode_envelope(
      slack_event_sender::event_body(event("Ev1", "<@U0BOT> hello", "1.0")), "U0BOT");
  REQUIRE(mention);
  const auto messages = slack_inbound(*mention, "U0BOT");
  REQUIRE(messages.size() == 1);
  CHECK(messages[0].text == "hello");
  auto bare = slack::decode_envelope(
      slack_event_sender::event_body(event("Ev2", "<@U0BOT>", "2.0")), "U0BOT");
  REQUIRE(bare);
  CHECK(slack_inbound(*bare, "U0BOT").empty());
  auto own_event = event("Ev3", "my answer", "3.0");
  own_event.user = "U0BOT";
  auto own = slack::decode_envelope(slack_event_sender::event_body(own_event), "U0BOT");
  REQUIRE(own);
  CHECK(slack_inbound(*own, "U0BOT").empty());
}

TEST_CASE("slack reply_to holds the channel and the thread", "[net][channels][slack]") {
  const auto t = parse_slack_reply_to("C1:10.000100");
  REQUIRE(t);
  CHECK(t->channel == "C1");
  CHECK(t->thread_ts == "10.000100");
  CHECK_FALSE(parse_slack_reply_to(""));
  CHECK_FALSE(parse_slack_reply_to("C1"));
  CHECK_FALSE(parse_slack_reply_to(":1.0"));
  // No thread: the channel's top level (a slash command's answer).
  const auto top = parse_slack_reply_to("C1:");
  REQUIRE(top);
  CHECK(top->channel == "C1");
  CHECK(top->thread_ts.empty());
}

TEST_CASE("the slack adapter takes a slash command, form-encoded and signed, as a message of its "
          "channel",
          "[net][channels][slack]") {
  const auto adapter = std::make_shared<slack_adapter>(options_for());
  slack_event_sender::slash_command command;
  command.command = "/continue";
  command.text = "2 please";
  command.trigger_id = "13345224609.738474920.8088930838d88f008e0";
  const auto body = slack_event_sender::slash_command_body(command);
  auto request = signed_request(body, now_seconds());
  request.headers.push_back({"Content-Type", "application/x-www-form-urlencoded"});
  // Verified like an event: the signature covers the form body.
  CHECK(adapter->verify(request));
  auto decoded = adapter->decode(request);
  REQUIRE(decoded);
  REQUIRE(decoded->messages.size() == 1);
  const auto& m = decoded->messages[0];
  CHECK(m.message_id == "command:13345224609.738474920.8088930838d88f008e0");
  CHECK(m.delivery_id.empty());
  CHECK(m.thread == "C0TEST");
  CHECK(m.sender == "U0USER");
  CHECK(m.text == "/continue 2 please");
  CHECK(m.reply_to == "C0TEST:");
  // Acknowledged with an empty body: Slack would show a body as the command's answer.
  CHECK(decoded->empty_response);
  // Without a Content-Type, a body that is not a JSON object is read as a form too.
  auto bare = signed_request(body, now_seconds());
  auto again = adapter->decode(bare);
  REQUIRE(again);
  CHECK(again->messages.size() == 1);
  // A form without what a command needs is refused (400).
  for (const auto* broken : {"command=%2Fnew&channel_id=C1&user_id=U1",
                             "command=new&channel_id=C1&user_id=U1&trigger_id=t",
                             "text=hi&channel_id=C1&user_id=U1&trigger_id=t"}) {
    auto refused = adapter->decode(signed_request(broken, now_seconds()));
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == errc::invalid_argument);
  }
}

TEST_CASE("the slack adapter posts mrkdwn in the thread and classifies the Web API's answers",
          "[net][channels][slack]") {
  fake_slack fake;
  const auto adapter =
      std::make_shared<slack_adapter>(options_for(fake.api_base(), fake.bot_token()));
  CHECK(adapter->split(std::string(3000, 'a') + "\n\n" + std::string(3000, 'b')).size() == 2);
  asio::io_context io;
  http_client http(io.get_executor());

  auto sent = run_until_done(io, adapter->send(http, part_of("C1:10.0001", "**hi** <@U1>"), 5s));
  CHECK(sent.outcome == send_outcome::sent);
  CHECK_FALSE(sent.platform_message_id.empty());
  REQUIRE(fake.posts().size() == 1);
  CHECK(fake.posts()[0].channel == "C1");
  CHECK(fake.posts()[0].thread_ts == "10.0001");
  CHECK(fake.posts()[0].text == "*hi* &lt;@U1&gt;");
  CHECK(fake.calls("chat.postMessage")[0].header("Authorization") == "Bearer " + fake.bot_token());

  fake.fail("chat.postMessage", {slack_fault::kind::rate_limited, 9});
  auto limited = run_until_done(io, adapter->send(http, part_of("C1:1.0", "x"), 5s));
  CHECK(limited.outcome == send_outcome::retry);
  CHECK(limited.retry_after == 9s);

  fake.fail("chat.postMessage", {slack_fault::kind::error_word, 0, "ratelimited"});
  auto limited_200 = run_until_done(io, adapter->send(http, part_of("C1:1.0", "x"), 5s));
  CHECK(limited_200.outcome == send_outcome::retry);

  fake.fail("chat.postMessage", {slack_fault::kind::server_error, 0});
  auto down = run_until_done(io, adapter->send(http, part_of("C1:1.0", "x"), 5s));
  CHECK(down.outcome == send_outcome::retry);

  fake.fail("chat.postMessage", {slack_fault::kind::error_word, 0, "channel_not_found"});
  auto missing = run_until_done(io, adapter->send(http, part_of("C1:1.0", "x"), 5s));
  CHECK(missing.outcome == send_outcome::failed);
  CHECK_THAT(missing.error, Catch::Contains("channel_not_found"));

  const auto wrong = std::make_shared<slack_adapter>(options_for(fake.api_base(), "xoxb-wrong"));
  auto refused = run_until_done(io, wrong->send(http, part_of("C1:1.0", "x"), 5s));
  CHECK(refused.outcome == send_outcome::failed);
  CHECK_THAT(refused.error, Catch::Contains("invalid_auth"));
}

TEST_CASE("the slack adapter edits a message it posted with chat.update",
          "[net][channels][slack]") {
  fake_slack fake;
  const auto adapter =
      std::make_shared<slack_adapter>(options_for(fake.api_base(), fake.bot_token()));
  REQUIRE(adapter->supports_edits());
  asio::io_context io;
  http_client http(io.get_executor());

  auto sent = run_until_done(io, adapter->send(http, part_of("C1:10.0001", "first"), 5s));
  REQUIRE(sent.outcome == send_outcome::sent);
  auto edited = run_until_done(
      io, adapter->edit(http, part_of("C1:10.0001", "**second**"), sent.platform_message_id, 5s));
  CHECK(edited.outcome == send_outcome::sent);
  CHECK(edited.platform_message_id == sent.platform_message_id);
  REQUIRE(fake.posts().size() == 1);
  CHECK(fake.posts()[0].text == "*second*");
  CHECK(fake.posts()[0].updates == 1);

  fake.fail("chat.update", {slack_fault::kind::rate_limited, 4});
  auto limited = run_until_done(
      io, adapter->edit(http, part_of("C1:10.0001", "third"), sent.platform_message_id, 5s));
  CHECK(limited.outcome == send_outcome::retry);
  CHECK(limited.retry_after == 4s);

  auto unknown = run_until_done(io, adapter->edit(http, part_of("C1:10.0001", "x"), "1.99999", 5s));
  CHECK(unknown.outcome == send_outcome::failed);
  CHECK_THAT(unknown.error, Catch::Contains("message_not_found"));
}
