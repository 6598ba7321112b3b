#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "support/fake_telegram.hpp"
#include "support/run_until_done.hpp"
#include "support/wait_until.hpp"
#include "troupe/net/channel/telegram_adapter.hpp"

// g++ 12 at -O2 reports -Wmismatched-new-delete for Asio coroutine frames it inlines: a
// known false positive (awaitable_frame_base pairs its own operator new and delete).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

using namespace troupe;
using namespace troupe::net;
using namespace troupe::net::channel;
using namespace std::chrono_literals;
using troupe::test::fake_telegram;
using troupe::test::run_until_done;
using troupe::test::telegram_fault;

namespace {

telegram_options webhook_options(std::string token = "123:abc") {
  telegram_options o;
  o.channel = "tg";
  o.token = std::move(token);
  o.api_base = "http://127.0.0.1:1";
  o.mode = "webhook";
  o.webhook_url = "https://example.org/api/v1/webhooks/channels/tg";
  return o;
}

http_request inbound(std::string secret, std::string body) {
  http_request r;
  r.method = http_method::post;
  r.path = "/api/v1/webhooks/channels/tg";
  if (!secret.empty()) {
    r.headers.push_back({"X-Telegram-Bot-Api-Secret-Token", std::move(secret)});
  }
  r.body = std::move(body);
  return r;
}

std::string update(std::int64_t update_id, std::string_view message_fields) {
  return R"({"update_id":)" + std::to_string(update_id) + R"(,"message":{)" +
         std::string(message_fields) + "}}";
}

outbound_part part_of(std::string reply_to, std::string text) {
  outbound_part p;
  p.reply_to = std::move(reply_to);
  p.run_id = "run-1";
  p.text = std::move(text);
  return p;
}

} // namespace

TEST_CASE("the telegram adapter verifies the webhook's secret token", "[net][channels][telegram]") {
  const auto adapter = std::make_shared<telegram_adapter>(webhook_options());
  const auto secret = telegram_webhook_secret("123:abc", "tg");
  CHECK(secret.size() == 64);
  CHECK(telegram::valid_secret_token(secret));
  // Stable for the same token and channel, different for another channel or token.
  CHECK(secret == telegram_webhook_secret("123:abc", "tg"));
  CHECK(secret != telegram_webhook_secret("123:abc", "tg2"));
  CHECK(secret != telegram_webhook_secret("123:abd", "tg"));
  CHECK(adapter->verify(inbound(secret, "{}")));
  for (const auto& wrong : {std::string(), secret.substr(1), secret + "0", std::string("x")}) {
    auto refused = adapter->verify(inbound(wrong, "{}"));
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == errc::permission_denied);
  }
  // A polling channel takes no webhook at all.
  auto poll = webhook_options();
  poll.mode = "poll";
  const auto poller = std::make_shared<telegram_adapter>(poll);
  CHECK_FALSE(poller->verify(inbound(secret, "{}")));
}

TEST_CASE("the telegram adapter decodes text messages from people only",
          "[net][channels][telegram]") {
  const auto adapter = std::make_shared<telegram_adapter>(webhook_options());
  auto decoded = adapter->decode(
      inbound("", update(10, R"("message_id":5,"date":1,"chat":{"id":-1007,"type":"supergroup"},)"
                             R"("message_thread_id":3,"is_topic_message":true,)"
                             R"("from":{"id":42,"is_bot":false,"first_name":"Ann"},"text":"hi")")));
  REQUIRE(decoded);
  REQUIRE(decoded->messages.size() == 1);
  const auto& m = decoded->messages[0];
  CHECK(m.message_id == "-1007:5");    // chat + message id: the journal's key
  CHECK(m.delivery_id == "update:10"); // and the update id, its second key
  CHECK(m.thread == "-1007:3");        // chat + topic
  CHECK(m.sender == "42");
  CHECK(m.text == "hi");
  CHECK(m.reply_to == "-1007:3");
  CHECK(decoded->response_body.empty());

  // A bot's message, an edit and a message without text give no message.
  auto bot = adapter->decode(
      inbound("", update(11, R"("message_id":6,"date":1,"chat":{"id":9,"type":"private"},)"
                             R"("from":{"id":9,"is_bot":true,"first_name":"B"},"text":"hi")")));
  REQUIRE(bot);
  CHECK(bot->messages.empty());
  auto edit = adapter->decode(inbound(
      "", R"({"update_id":12,"edited_message":{"message_id":5,"date":1,"edit_date":2,)"
          R"("chat":{"id":9,"type":"private"},"from":{"id":9,"is_bot":false},"text":"x"}})"));
  REQUIRE(edit);
  CHECK(edit->messages.empty());
  auto sticker = adapter->decode(inbound(
      "", update(13, R"("message_id":7,"date":1,"chat":{"id":9,"type":"private"},"sticker":{})")));
  REQUIRE(sticker);
  CHECK(sticker->messages.empty());
  // Bytes that are not an update are a 400.
  auto bad = adapter->decode(inbound("", "{not json"));
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == errc::invalid_argument);
}

TEST_CASE("the telegram adapter takes a button press as its sender's message and answers the "
          "query in the webhook's response",
          "[net][channels][telegram]") {
  const auto adapter = std::make_shared<telegram_adapter>(webhook_options());
  auto decoded = adapter->decode(inbound(
      "", R"({"update_id":20,"callback_query":{"id":"cbq-7","from":{"id":42,"is_bot":false,)"
          R"("first_name":"Ann"},"message":{"message_id":120,"date":1,)"
          R"("chat":{"id":-1007,"type":"supergroup"},"text":"Approval needed"},)"
          R"("chat_instance":"1","data":"/approve 5d1f"}})"));
  REQUIRE(decoded);
  REQUIRE(decoded->messages.size() == 1);
  const auto& m = decoded->messages[0];
  CHECK(m.message_id == "callback:cbq-7");
  CHECK(m.delivery_id == "update:20");
  CHECK(m.thread == "-1007");
  CHECK(m.sender == "42");
  CHECK(m.text == "/approve 5d1f");
  // Telegram runs the method the webhook's answer names: the button stops spinning.
  CHECK(decoded->response_body ==
        R"({"method":"answerCallbackQuery","callback_query_id":"cbq-7"})");
}

TEST_CASE("the telegram adapter sends a part's choices as inline buttons when their data fits",
          "[net][channels][telegram]") {
  fake_telegram fake;
  auto o = webhook_options(fake.token());
  o.api_base = fake.api_base();
  const auto adapter = std::make_shared<telegram_adapter>(o);
  asio::io_context io;
  http_client http(io.get_executor());
  auto p = part_of("1001", "Approval needed");
  p.choices = {{"Approve", "/approve 5d1f"}, {"Deny", "/deny 5d1f"}};
  auto sent = run_until_done(io, adapter->send(http, p, 5s));
  CHECK(sent.outcome == send_outcome::sent);
  using button = std::pair<std::string, std::string>;
  REQUIRE(fake.sent().size() == 1);
  CHECK(fake.sent()[0].buttons ==
        std::vector<button>{{"Approve", "/approve 5d1f"}, {"Deny", "/deny 5d1f"}});
  // Callback data over Telegram's 64 bytes: the text alone (it says how to answer).
  p.choices = {{"Approve", "/approve " + std::string(60, 'x')}};
  auto plain = run_until_done(io, adapter->send(http, p, 5s));
  CHECK(plain.outcome == send_outcome::sent);
  REQUIRE(fake.sent().size() == 2);
  CHECK(fake.sent()[1].buttons.empty());
}

TEST_CASE("telegram reply_to holds the chat and the topic", "[net][channels][telegram]") {
  CHECK(parse_telegram_reply_to("1001")->chat_id == 1001);
  CHECK_FALSE(parse_telegram_reply_to("1001")->topic);
  const auto topic = parse_telegram_reply_to("-100555:7");
  REQUIRE(topic);
  CHECK(topic->chat_id == -100555);
  CHECK(topic->topic == std::optional<std::int64_t>(7));
  CHECK_FALSE(parse_telegram_reply_to(""));
  CHECK_FALSE(parse_telegram_reply_to("abc"));
  CHECK_FALSE(parse_telegram_reply_to("1:x"));
}

TEST_CASE("the telegram adapter splits at 4,000 characters", "[net][channels][telegram]") {
  const auto adapter = std::make_shared<telegram_adapter>(webhook_options());
  CHECK(adapter->split("short") == std::vector<std::string>{"short"});
  const std::string paragraph(3000, 'a');
  const auto parts = adapter->split(paragraph + "\n\n" + paragraph);
  REQUIRE(parts.size() == 2);
  CHECK(parts[0] == paragraph);
  CHECK(parts[1] == paragraph);
}

TEST_CASE("the telegram adapter sends HTML and classifies the Bot API's answers",
          "[net][channels][telegram]") {
  fake_telegram fake;
  auto o = webhook_options(fake.token());
  o.api_base = fake.api_base();
  const auto adapter = std::make_shared<telegram_adapter>(o);
  asio::io_context io;
  http_client http(io.get_executor());

  auto sent = run_until_done(io, adapter->send(http, part_of("1001", "**hi** <x>"), 5s));
  CHECK(sent.outcome == send_outcome::sent);
  CHECK_FALSE(sent.platform_message_id.empty());
  REQUIRE(fake.sent().size() == 1);
  CHECK(fake.sent()[0].text == "<b>hi</b> &lt;x&gt;");
  CHECK(fake.sent()[0].parse_mode == "HTML");

  // Refused HTML: the same part again at once, as plain text.
  fake.fail("sendMessage", {telegram_fault::kind::parse_entities, 0});
  auto plain = run_until_done(io, adapter->send(http, part_of("1001", "**hi**"), 5s));
  CHECK(plain.outcome == send_outcome::sent);
  CHECK(fake.sent().back().text == "**hi**");
  CHECK(fake.sent().back().parse_mode.empty());

  fake.fail("sendMessage", {telegram_fault::kind::rate_limited, 7});
  auto limited = run_until_done(io, adapter->send(http, part_of("1001", "x"), 5s));
  CHECK(limited.outcome == send_outcome::retry);
  CHECK(limited.retry_after == 7s);

  fake.fail("sendMessage", {telegram_fault::kind::server_error, 0});
  auto down = run_until_done(io, adapter->send(http, part_of("1001", "x"), 5s));
  CHECK(down.outcome == send_outcome::retry);

  fake.fail("sendMessage", {telegram_fault::kind::blocked, 0});
  auto blocked = run_until_done(io, adapter->send(http, part_of("1001", "x"), 5s));
  CHECK(blocked.outcome == send_outcome::failed);
  CHECK_THAT(blocked.error, Catch::Contains("403"));

  auto nowhere = run_until_done(io, adapter->send(http, part_of("not a chat", "x"), 5s));
  CHECK(nowhere.outcome == send_outcome::failed);

  // Typing is best effort: a failure is only logged.
  fake.fail("sendChatAction", {telegram_fault::kind::server_error, 0});
  run_until_done(io,
                 [](std::shared_ptr<telegram_adapter> a, http_client& h) -> asio::awaitable<bool> {
                   auto typing = a->typing(h, "1001:7", 5s);
                   co_await std::move(typing);
                   co_return true;
                 }(adapter, http));
  REQUIRE(fake.calls("sendChatAction").size() == 1);
  CHECK(fake.calls("sendChatAction")[0].status == 500);
  CHECK(fake.calls("sendChatAction")[0].body.find("\"message_thread_id\":7") != std::string::npos);
}

TEST_CASE("the telegram adapter edits a message it sent, and the same text counts as done",
          "[net][channels][telegram]") {
  fake_telegram fake;
  auto o = webhook_options(fake.token());
  o.api_base = fake.api_base();
  const auto adapter = std::make_shared<telegram_adapter>(o);
  REQUIRE(adapter->supports_edits());
  asio::io_context io;
  http_client http(io.get_executor());

  auto sent = run_until_done(io, adapter->send(http, part_of("1001", "first"), 5s));
  REQUIRE(sent.outcome == send_outcome::sent);
  auto edited = run_until_done(
      io, adapter->edit(http, part_of("1001", "**second**"), sent.platform_message_id, 5s));
  CHECK(edited.outcome == send_outcome::sent);
  CHECK(edited.platform_message_id == sent.platform_message_id);
  REQUIRE(fake.sent().size() == 1);
  CHECK(fake.sent()[0].text == "<b>second</b>");
  CHECK(fake.sent()[0].edits == 1);

  // Telegram refuses an edit that changes nothing (400 "message is not modified").
  auto same = run_until_done(
      io, adapter->edit(http, part_of("1001", "**second**"), sent.platform_message_id, 5s));
  CHECK(same.outcome == send_outcome::sent);
  CHECK(fake.calls("editMessageText").back().status == 400);
  CHECK(fake.sent()[0].edits == 1);

  // Refused HTML: the edit again as plain text.
  fake.fail("editMessageText", {telegram_fault::kind::parse_entities, 0});
  auto plain = run_until_done(
      io, adapter->edit(http, part_of("1001", "**third**"), sent.platform_message_id, 5s));
  CHECK(plain.outcome == send_outcome::sent);
  CHECK(fake.sent()[0].text == "**third**");
  CHECK(fake.sent()[0].parse_mode.empty());

  fake.fail("editMessageText", {telegram_fault::kind::rate_limited, 3});
  auto limited = run_until_done(
      io, adapter->edit(http, part_of("1001", "fourth"), sent.platform_message_id, 5s));
  CHECK(limited.outcome == send_outcome::retry);
  CHECK(limited.retry_after == 3s);

  auto unknown = run_until_done(io, adapter->edit(http, part_of("1001", "x"), "999999", 5s));
  CHECK(unknown.outcome == send_outcome::failed);
  auto not_an_id = run_until_done(io, adapter->edit(http, part_of("1001", "x"), "abc", 5s));
  CHECK(not_an_id.outcome == send_outcome::failed);
}

TEST_CASE("the telegram adapter learns the bot's username from getMe at start",
          "[net][channels][telegram]") {
  fake_telegram fake;
  auto o = webhook_options(fake.token());
  o.api_base = fake.api_base();
  const auto adapter = std::make_shared<telegram_adapter>(o);
  CHECK(adapter->bot_name().empty());
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  http_client http(io.get_executor());
  std::thread runner([&io] { io.run(); });
  adapter->start(http, {});
  CHECK(troupe::test::wait_until([&] { return adapter->bot_name() == "fake_bot"; }, 30s));
  // Then the webhook is registered, as before.
  CHECK(troupe::test::wait_until([&] { return !fake.webhook_url().empty(); }, 30s));
  REQUIRE_FALSE(fake.calls().empty());
  CHECK(fake.calls().front().method == "getMe");
  adapter->stop(true);
  work.reset();
  io.stop();
  runner.join();
}

TEST_CASE("the telegram poll loop confirms a batch once it is journaled, backs off, and stops at "
          "once",
          "[net][channels][telegram]") {
  fake_telegram fake;
  auto o = webhook_options(fake.token());
  o.api_base = fake.api_base();
  o.mode = "poll";
  o.first_backoff = 200ms;
  const auto adapter = std::make_shared<telegram_adapter>(o);
  // Two failed polls, then one whose batch the journal refuses once.
  fake.fail("getUpdates", {telegram_fault::kind::server_error, 0}, 2);
  troupe::test::telegram_incoming hello;
  hello.text = "hello";
  const auto id = fake.push_message(hello);

  asio::io_context io;
  auto work = asio::make_work_guard(io);
  http_client http(io.get_executor());
  std::thread runner([&io] { io.run(); });
  std::mutex mutex;
  std::vector<std::string> journaled;
  int offered = 0;
  inbound_sink sink =
      [&](std::vector<inbound_message> batch) -> asio::awaitable<troupe::expected<void>> {
    const std::lock_guard lock(mutex);
    if (++offered == 1) {
      co_return troupe::fail(errc::unavailable, "the journal is down");
    }
    for (auto& m : batch) {
      journaled.push_back(m.message_id);
    }
    co_return troupe::expected<void>{};
  };
  adapter->start(http, sink);
  REQUIRE(troupe::test::wait_until(
      [&] {
        const std::lock_guard lock(mutex);
        return !journaled.empty();
      },
      30s));
  // Confirmed by the next call's offset only now, and never before.
  REQUIRE(troupe::test::wait_until([&] { return fake.confirmed_through() >= id; }, 30s));
  // (The fake records a call once answered: the confirming one is still waiting.)
  const auto polls = fake.calls("getUpdates");
  REQUIRE(polls.size() >= 4);
  CHECK(polls[0].status == 500);
  CHECK(polls[1].status == 500);
  CHECK(polls[2].status == 200);
  CHECK(polls[3].status == 200);
  for (std::size_t k = 0; k < 4; ++k) {
    CHECK(polls[k].body.find("\"offset\"") == std::string::npos);
  }
  // A doubling back-off after each failure (the calls are recorded as they are answered).
  CHECK(polls[1].at - polls[0].at >= 190ms);
  CHECK(polls[2].at - polls[1].at >= 390ms);
  CHECK(polls[3].at - polls[2].at >= 790ms);
  {
    const std::lock_guard lock(mutex);
    CHECK(offered == 2);
    CHECK(journaled == std::vector<std::string>{"1001:10"});
  }
  // A long poll is waiting now; stop cancels it at once.
  REQUIRE(troupe::test::wait_until([&] { return fake.waiting_polls() == 1; }, 30s));
  const auto asked = std::chrono::steady_clock::now();
  adapter->stop(true);
  CHECK(std::chrono::steady_clock::now() - asked < 1s);
  work.reset();
  io.stop();
  runner.join();
}

TEST_CASE("the telegram poll loop backs off when the server answers at once with nothing",
          "[net][channels][telegram]") {
  fake_telegram fake;
  auto o = webhook_options(fake.token());
  o.api_base = fake.api_base();
  o.mode = "poll";
  // A long poll of 0 s: the fake answers every call at once with no update.
  o.poll_timeout = 0s;
  o.first_backoff = 100ms;
  const auto adapter = std::make_shared<telegram_adapter>(o);
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  http_client http(io.get_executor());
  std::thread runner([&io] { io.run(); });
  adapter->start(http, [](std::vector<inbound_message>) -> asio::awaitable<troupe::expected<void>> {
    co_return troupe::expected<void>{};
  });
  REQUIRE(fake.wait_for_calls("getUpdates", 4, 30s));
  adapter->stop(true);
  const auto polls = fake.calls("getUpdates");
  CHECK(polls[1].at - polls[0].at >= 95ms);
  CHECK(polls[2].at - polls[1].at >= 190ms);
  CHECK(polls[3].at - polls[2].at >= 390ms);
  work.reset();
  io.stop();
  runner.join();
}
