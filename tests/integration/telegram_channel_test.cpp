// The Telegram channel end to end: the real `troupe serve` binary, a scripted mock-llm and
// the fake Bot API (support/fake_telegram.hpp) — poll mode (getUpdates) and webhook mode
// (setWebhook, the secret header), redeliveries answered once, a 429 honoured, failing
// typing calls that leave replies alone, a long answer split, HTML refused and sent
// again as plain text, bots and edits ignored, forum topics as threads.

#include <csignal>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/fake_telegram.hpp"
#include "support/long_answer.hpp"
#include "support/raw_http.hpp"
#include "support/wait_until.hpp"
#include "troupe/mock/mock_llm_server.hpp"
#include "troupe/net/channel/telegram_adapter.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

/// More than a Telegram part holds in all.
std::string long_answer() {
  return troupe::test::long_answer(5);
}

troupe::mock::mock_llm_options scripted_mock() {
  const auto script = R"([
    {"match": {"user": "hello"}, "reply": {"text": "Hi there"}},
    {"match": {"user": "second"}, "reply": {"text": "Second answer"}},
    {"match": {"user": "slow"}, "ttft_ms": 6000, "reply": {"text": "Slow answer"}},
    {"match": {"user": "bold"}, "reply": {"text": "**bold** move"}},
    {"match": {"user": "long"}, "reply": {"text": ")" +
                      json_escaped(long_answer()) + R"("}}
  ])";
  return scripted(script);
}

std::string base_config(const mock_llm_fixture& mock) {
  return mock_provider_toml(mock) +
         "[[agents]]\nname = \"helper\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n"
         "tools = [\"finish\"]\ntimeout_s = 60\n";
}

std::string poll_channel(const fake_telegram& fake) {
  return "[[channels]]\nname = \"tg\"\ntype = \"telegram\"\nagent = \"helper\"\nmode = \"poll\"\n"
         "token = \"" +
         fake.token() + "\"\napi_base = \"" + fake.api_base() + "\"\n";
}

/// A node whose channel "tg" polls the fake.
struct poll_node {
  mock_llm_fixture mock{scripted_mock()};
  fake_telegram fake;
  api_server server{"rate_per_second = 1000\nrate_burst = 1000\n",
                    base_config(mock) + poll_channel(fake)};

  std::int64_t say(const std::string& text, std::int64_t chat = 1001) {
    telegram_incoming m;
    m.chat_id = chat;
    m.from_id = chat;
    m.text = text;
    return fake.push_message(m);
  }
  std::string channel() const {
    return body_of(server.call("GET", "/api/v1/channels/tg", server.admin()));
  }
};

/// A node with no declared channel: tests create a webhook-mode one over the API (its
/// callback_url names the node's port).
struct webhook_node {
  mock_llm_fixture mock{scripted_mock()};
  fake_telegram fake;
  api_server server{"rate_per_second = 1000\nrate_burst = 1000\n", base_config(mock)};

  webhook_node() {
    const auto url =
        "http://127.0.0.1:" + std::to_string(server.port()) + "/api/v1/webhooks/channels/tgw";
    const auto created = server.call("POST", "/api/v1/channels", server.admin(),
                                     R"({"name":"tgw","type":"telegram","agent":"helper",)"
                                     R"("mode":"webhook","token":")" +
                                         fake.token() + R"(","api_base":")" + fake.api_base() +
                                         R"(","callback_url":")" + url + R"("})");
    REQUIRE(status_of(created) == 201);
    REQUIRE(wait_until([&] { return fake.webhook_url() == url; }, 30s));
  }
  std::int64_t say(const std::string& text) {
    telegram_incoming m;
    m.text = text;
    return fake.push_message(m);
  }
};

} // namespace

TEST_CASE("telegram poll: a message is answered once in its chat, as HTML",
          "[integration][channels][telegram]") {
  poll_node node;
  REQUIRE(node.server.port() != 0);
  const auto id = node.say("hello");
  REQUIRE(node.fake.wait_for_sent(1, 30s));
  const auto sent = node.fake.sent();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].chat_id == 1001);
  CHECK(sent[0].text == "Hi there");
  CHECK(sent[0].parse_mode == "HTML");
  // The batch was confirmed (offset = its update_id + 1) once journaled.
  REQUIRE(wait_until([&] { return node.fake.confirmed_through() >= id; }, 30s));
  // The thread is the chat, owned by the thread's identity (thread scope).
  const auto threads =
      body_of(node.server.call("GET", "/api/v1/channels/tg/threads", node.server.admin()));
  CHECK(json_field(threads, "thread_key") == "1001");
  CHECK(json_field(threads, "owner") == "channel-thread:tg:1001");
  // Marked sent once the platform's answer is recorded (just after the fake has it).
  REQUIRE(wait_until([&] { return json_field(node.channel(), "sent") == "1"; }, 30s));
  CHECK(node.channel().find(node.fake.token()) == std::string::npos);
}

TEST_CASE("telegram poll: the same message delivered three times is answered once",
          "[integration][channels][telegram]") {
  poll_node node;
  const auto id = node.say("hello");
  // The same chat and message under new update ids (Telegram's update ids restart).
  node.fake.repeat_update(id);
  node.fake.repeat_update(id);
  node.say("second");
  REQUIRE(node.fake.wait_for_sent(2, 30s));
  const auto sent = node.fake.sent();
  REQUIRE(sent.size() == 2);
  CHECK(sent[0].text == "Hi there");
  CHECK(sent[1].text == "Second answer");
  CHECK(node.mock.stats().completion_requests == 2);
}

TEST_CASE("telegram poll: bots, edits and other updates are not answered",
          "[integration][channels][telegram]") {
  poll_node node;
  telegram_incoming bot;
  bot.text = "hello";
  bot.from_id = 4242;
  bot.from_is_bot = true;
  node.fake.push_message(bot);
  node.fake.push_update(
      R"("edited_message":{"message_id":99,"date":1,"edit_date":2,)"
      R"("chat":{"id":1001,"type":"private"},"from":{"id":1001,"is_bot":false,"first_name":"T"},)"
      R"("text":"hello again"})");
  node.say("second");
  REQUIRE(node.fake.wait_for_sent(1, 30s));
  CHECK(node.fake.sent()[0].text == "Second answer");
  CHECK(node.mock.stats().completion_requests == 1);
}

TEST_CASE("telegram poll: a forum topic is its own thread, answered in the topic",
          "[integration][channels][telegram]") {
  poll_node node;
  telegram_incoming m;
  m.chat_id = -100555;
  m.from_id = 31;
  m.topic = 7;
  m.text = "hello";
  node.fake.push_message(m);
  REQUIRE(node.fake.wait_for_sent(1, 30s));
  const auto sent = node.fake.sent();
  CHECK(sent[0].chat_id == -100555);
  CHECK(sent[0].topic == std::optional<std::int64_t>(7));
  const auto threads =
      body_of(node.server.call("GET", "/api/v1/channels/tg/threads", node.server.admin()));
  CHECK(json_field(threads, "thread_key") == "-100555:7");
}

TEST_CASE("telegram: a 429 on sendMessage is retried after its retry_after, once",
          "[integration][channels][telegram]") {
  poll_node node;
  node.fake.fail("sendMessage", {telegram_fault::kind::rate_limited, 2});
  node.say("hello");
  // The fake records a call once it answered it (after the message counts as sent).
  REQUIRE(node.fake.wait_for_calls("sendMessage", 2, 30s));
  const auto calls = node.fake.calls("sendMessage");
  REQUIRE(calls.size() == 2);
  CHECK(calls[0].status == 429);
  CHECK(calls[1].status == 200);
  CHECK(calls[1].at - calls[0].at >= 1950ms);
  CHECK(calls[0].body == calls[1].body);
  CHECK(node.fake.sent().size() == 1);
}

TEST_CASE("telegram: typing is shown every 4 s during a run and its failures leave the reply alone",
          "[integration][channels][telegram]") {
  poll_node node;
  node.fake.fail_always("sendChatAction", {telegram_fault::kind::server_error, 0});
  node.say("slow");
  REQUIRE(node.fake.wait_for_calls("sendMessage", 1, 60s));
  CHECK(node.fake.sent()[0].text == "Slow answer");
  const auto typing = node.fake.calls("sendChatAction");
  // At the start and 4 s later, during the 6 s the model takes; all refused with 500.
  REQUIRE(typing.size() >= 2);
  CHECK(typing[1].at - typing[0].at >= 3900ms);
  for (const auto& call : typing) {
    CHECK(call.status == 500);
    CHECK(json_field(call.body, "action") == "typing");
  }
  // No typing once the reply is out (the loop stops with the run).
  const auto reply_at = node.fake.calls("sendMessage").back().at;
  for (const auto& call : node.fake.calls("sendChatAction")) {
    CHECK(call.at <= reply_at);
  }
  CHECK(node.fake.sent().size() == 1);
}

TEST_CASE("telegram: a long answer is split at 4,000 characters on paragraph breaks",
          "[integration][channels][telegram]") {
  poll_node node;
  node.say("long");
  REQUIRE(node.fake.wait_for_sent(2, 30s));
  REQUIRE(wait_until([&] { return json_field(node.channel(), "pending") == "0"; }, 30s));
  const auto sent = node.fake.sent();
  REQUIRE(sent.size() == 2);
  std::string joined;
  for (const auto& part : sent) {
    CHECK(part.text.size() <= 4000);
    CHECK_THAT(part.text, Catch::StartsWith("Paragraph "));
    joined += (joined.empty() ? "" : "\n\n") + part.text;
  }
  CHECK(joined == long_answer());
}

TEST_CASE("telegram: HTML Telegram cannot parse is sent again at once as plain text",
          "[integration][channels][telegram]") {
  poll_node node;
  node.fake.fail("sendMessage", {telegram_fault::kind::parse_entities, 0});
  node.say("bold");
  REQUIRE(node.fake.wait_for_calls("sendMessage", 2, 30s));
  const auto calls = node.fake.calls("sendMessage");
  REQUIRE(calls.size() == 2);
  CHECK(calls[0].status == 400);
  CHECK(json_field(calls[0].body, "parse_mode") == "HTML");
  CHECK(json_field(calls[0].body, "text") == "<b>bold</b> move");
  CHECK(calls[1].status == 200);
  CHECK(calls[1].body.find("parse_mode") == std::string::npos);
  const auto sent = node.fake.sent();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].text == "**bold** move");
  CHECK(sent[0].parse_mode.empty());
}

TEST_CASE("telegram webhook: setWebhook with a secret, updates verified, redeliveries answered "
          "once",
          "[integration][channels][telegram]") {
  webhook_node node;
  CHECK(node.fake.webhook_secret() ==
        troupe::net::channel::telegram_webhook_secret(node.fake.token(), "tgw"));
  const auto id = node.say("hello");
  // A forged delivery (no secret, a wrong one) is 401 and journals nothing.
  const auto body = node.fake.update_json(id);
  CHECK(status_of(http_exchange(node.server.port(), "POST", "/api/v1/webhooks/channels/tgw", body,
                                "Content-Type: application/json\r\n")) == 401);
  CHECK(status_of(http_exchange(node.server.port(), "POST", "/api/v1/webhooks/channels/tgw", body,
                                "Content-Type: application/json\r\n"
                                "X-Telegram-Bot-Api-Secret-Token: wrong\r\n")) == 401);
  // Nothing was journaled: no message in the journal, no thread, no model call.
  CHECK(json_field(body_of(node.server.call("GET", "/api/v1/channels/tgw", node.server.admin())),
                   "messages") == "0");
  CHECK(json_field(
            body_of(node.server.call("GET", "/api/v1/channels/tgw/threads", node.server.admin())),
            "total") == "0");
  CHECK(node.mock.stats().completion_requests == 0);
  for (int i = 0; i < 3; ++i) {
    auto delivered = node.fake.deliver_webhook(id);
    REQUIRE(delivered);
    CHECK(delivered->status == 200);
  }
  const auto second = node.say("second");
  auto delivered = node.fake.deliver_webhook(second);
  REQUIRE(delivered);
  CHECK(delivered->status == 200);
  REQUIRE(node.fake.wait_for_sent(2, 30s));
  const auto sent = node.fake.sent();
  REQUIRE(sent.size() == 2);
  CHECK(sent[0].text == "Hi there");
  CHECK(sent[1].text == "Second answer");
  CHECK(node.mock.stats().completion_requests == 2);
  // A webhook-mode channel does not poll.
  CHECK(node.fake.calls("getUpdates").empty());
}

TEST_CASE("telegram poll: after a restart, redelivered updates are not answered again",
          "[integration][channels][telegram]") {
  poll_node node;
  const auto id = node.say("hello");
  REQUIRE(node.fake.wait_for_sent(1, 30s));
  node.server.restart(SIGTERM);
  REQUIRE(node.server.port() != 0);
  node.fake.repeat_update(id);
  node.say("second");
  REQUIRE(node.fake.wait_for_sent(2, 30s));
  const auto sent = node.fake.sent();
  REQUIRE(sent.size() == 2);
  CHECK(sent[1].text == "Second answer");
  CHECK(node.mock.stats().completion_requests == 2);
}

TEST_CASE("telegram poll: a troupe killed mid-run answers the message exactly once after its "
          "restart",
          "[integration][channels][telegram]") {
  // "hold" is answered in ten minutes: long after the troupe waiting for it is killed.
  mock_llm_fixture mock(holding(scripted_mock()));
  fake_telegram fake;
  api_server server("rate_per_second = 1000\nrate_burst = 1000\n",
                    base_config(mock) + poll_channel(fake));
  telegram_incoming m;
  m.text = "hold";
  const auto id = fake.push_message(m);
  REQUIRE(wait_until([&] { return mock.stats().completion_requests == 1; }, 30s));

  server.restart(SIGKILL);
  REQUIRE(server.port() != 0);
  // Telegram delivers it again under a new update id (and any update not confirmed).
  fake.repeat_update(id);
  m.text = "hello";
  fake.push_message(m);
  REQUIRE(fake.wait_for_sent(2, 30s));
  // Answered once: the interrupted message with a notice, the next one by the model.
  const auto sent = fake.sent();
  REQUIRE(sent.size() == 2);
  CHECK_THAT(sent[0].text, Catch::Contains("interrupted by a restart"));
  CHECK(sent[1].text == "Hi there");
  CHECK(mock.stats().completion_requests == 2);
  REQUIRE(wait_until(
      [&] {
        return json_field(body_of(server.call("GET", "/api/v1/channels/tg", server.admin())),
                          "sent") == "2";
      },
      30s));
}

TEST_CASE("telegram poll: a channel created over the API polls at once, and a change restarts "
          "its loop with the new settings",
          "[integration][channels][telegram]") {
  mock_llm_fixture mock{scripted_mock()};
  fake_telegram fake;
  api_server server{"rate_per_second = 1000\nrate_burst = 1000\n", base_config(mock)};
  const auto created =
      server.call("POST", "/api/v1/channels", server.admin(),
                  R"({"name":"tgp","type":"telegram","agent":"helper",)"
                  R"("token":")" +
                      fake.token() + R"(","api_base":")" + fake.api_base() + R"("})");
  REQUIRE(status_of(created) == 201);
  telegram_incoming m;
  m.text = "hello";
  fake.push_message(m);
  REQUIRE(fake.wait_for_sent(1, 30s));
  CHECK(fake.sent()[0].text == "Hi there");
  // A change (here the session scope) ends the loop and starts one with the new settings:
  // the next message is answered, once.
  REQUIRE(status_of(server.call("PATCH", "/api/v1/channels/tgp", server.admin(),
                                R"({"session_scope":"sender"})")) == 200);
  m.text = "second";
  fake.push_message(m);
  REQUIRE(fake.wait_for_sent(2, 30s));
  CHECK(fake.sent()[1].text == "Second answer");
  CHECK(mock.stats().completion_requests == 2);
  CHECK(fake.sent().size() == 2);
}

TEST_CASE("telegram: typing stops at its cap (actors.channel_typing_cap_ms) while the run goes on",
          "[integration][channels][telegram]") {
  auto options = scripted_mock();
  auto slower = troupe::mock::parse_mock_script(
      R"([{"match": {"user": "slower"}, "ttft_ms": 10000, "reply": {"text": "Slower answer"}}])");
  REQUIRE(slower);
  options.rules.insert(options.rules.begin(), slower->begin(), slower->end());
  mock_llm_fixture mock(std::move(options));
  fake_telegram fake;
  // A 5 s cap: typing at the start and 4 s later, then no more, though the run takes 10 s
  // (the default 2 minutes would show it a third time at 8 s).
  api_server server("rate_per_second = 1000\nrate_burst = 1000\n",
                    "[actors]\nchannel_typing_cap_ms = 5000\n" + base_config(mock) +
                        poll_channel(fake));
  telegram_incoming m;
  m.text = "slower";
  fake.push_message(m);
  // The fake records a call once it answered it.
  REQUIRE(fake.wait_for_calls("sendMessage", 1, 60s));
  CHECK(fake.sent()[0].text == "Slower answer");
  const auto typing = fake.calls("sendChatAction");
  REQUIRE(typing.size() == 2);
  CHECK(typing[1].at - typing[0].at >= 3900ms);
  const auto reply_at = fake.calls("sendMessage").back().at;
  CHECK(reply_at - typing[0].at >= 9s);
}

TEST_CASE("telegram: slash commands are answered without the model, in the chat",
          "[integration][channels][telegram][commands]") {
  poll_node node;
  node.say("/help");
  REQUIRE(node.fake.wait_for_sent(1, 30s));
  CHECK_THAT(node.fake.sent()[0].text, Catch::StartsWith("Commands:"));
  CHECK(node.mock.stats().completion_requests == 0);
  node.say("hello");
  REQUIRE(node.fake.wait_for_sent(2, 30s));
  // Addressed to this bot (getMe's username) it is ours; to another bot, it is not.
  node.say("/new@fake_bot");
  REQUIRE(node.fake.wait_for_sent(3, 30s));
  CHECK_THAT(node.fake.sent()[2].text, Catch::StartsWith("Started a new conversation."));
  node.say("/continue");
  REQUIRE(node.fake.wait_for_sent(4, 30s));
  CHECK_THAT(node.fake.sent()[3].text, Catch::Contains("hello \xE2\x80\x94 "));
  node.say("/continue 1");
  REQUIRE(node.fake.wait_for_sent(5, 30s));
  CHECK(node.fake.sent()[4].text ==
        "Resumed \xE2\x80\x9Chello\xE2\x80\x9D. Carry on where you left off.");
  node.say("/status");
  REQUIRE(node.fake.wait_for_sent(6, 30s));
  CHECK_THAT(node.fake.sent()[5].text, Catch::Contains("Active run: none"));
  CHECK(node.mock.stats().completion_requests == 1);
  for (const auto& s : node.fake.sent()) {
    CHECK(s.chat_id == 1001);
  }
}
