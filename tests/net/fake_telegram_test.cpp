#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "support/fake_telegram.hpp"
#include "support/wait_until.hpp"
#include "troupe/net/channel/telegram_wire.hpp"
#include "troupe/runtime/channel/text.hpp"

using namespace troupe;
using namespace troupe::test;
using namespace std::chrono_literals;
namespace tg = troupe::net::telegram;

namespace {

/// One Bot API call through net's HTTP client.
net::http_client_response call(const fake_telegram& fake, std::string_view method, std::string body,
                               std::string token = {}) {
  net::http_client_request request;
  request.method = net::http_method::post;
  request.url = tg::method_url(fake.api_base(), token.empty() ? fake.token() : token, method);
  request.headers.push_back({"Content-Type", "application/json"});
  request.body = std::move(body);
  request.deadlines.total = 30s;
  auto answer = blocking_fetch(std::move(request));
  REQUIRE(answer);
  return std::move(*answer);
}

tg::answer classified(const net::http_client_response& r) {
  return tg::classify_answer(r.status, r.body);
}

/// A sendMessage body.
std::string send_body(std::int64_t chat, std::string text, bool html = true,
                      std::optional<std::int64_t> topic = std::nullopt) {
  tg::send_message m;
  m.chat_id = chat;
  m.topic = topic;
  m.text = std::move(text);
  m.html = html;
  return tg::encode_send_message(m);
}

telegram_incoming incoming(std::int64_t chat, std::string text) {
  telegram_incoming m;
  m.chat_id = chat;
  m.from_id = chat;
  m.text = std::move(text);
  return m;
}

} // namespace

TEST_CASE("fake telegram: a long getUpdates answers as soon as an update arrives",
          "[net][telegram][fake]") {
  fake_telegram fake;
  net::http_client_response answer;
  const auto started = std::chrono::steady_clock::now();
  std::thread poller([&] { answer = call(fake, "getUpdates", tg::encode_get_updates(0, 20s)); });
  REQUIRE(wait_until([&] { return fake.waiting_polls() == 1; }, 10s));
  const auto id = fake.push_message([] {
    auto m = incoming(4211, "hello bot");
    m.from_first_name = "Ada";
    return m;
  }());
  poller.join();
  CHECK(std::chrono::steady_clock::now() - started < 15s);
  REQUIRE(answer.status == 200);
  const auto batch = tg::decode_get_updates(answer.body);
  REQUIRE(batch);
  REQUIRE(batch->messages.size() == 1);
  CHECK(batch->messages[0].update_id == id);
  CHECK(batch->messages[0].text == "hello bot");
  CHECK(batch->messages[0].from_name == "Ada");
  CHECK(batch->next_offset == id + 1);
}

TEST_CASE("fake telegram: a getUpdates without updates answers empty at its timeout",
          "[net][telegram][fake]") {
  fake_telegram fake;
  const auto started = std::chrono::steady_clock::now();
  const auto answer = call(fake, "getUpdates", tg::encode_get_updates(0, 1s));
  const auto took = std::chrono::steady_clock::now() - started;
  CHECK(took >= 900ms);
  CHECK(took < 10s);
  const auto batch = tg::decode_get_updates(answer.body);
  REQUIRE(batch);
  CHECK(batch->messages.empty());
}

TEST_CASE("fake telegram: updates are delivered again until an offset confirms them",
          "[net][telegram][fake]") {
  fake_telegram fake;
  const auto first = fake.push_message(incoming(1, "one"));
  const auto second = fake.push_message([] {
    auto m = incoming(-2, "two");
    m.topic = 7;
    return m;
  }());
  for (int round = 0; round < 2; ++round) {
    const auto batch = tg::decode_get_updates(call(fake, "getUpdates", "{}").body);
    REQUIRE(batch);
    REQUIRE(batch->messages.size() == 2);
    CHECK(batch->messages[0].update_id == first);
    CHECK(batch->messages[1].topic == 7);
  }
  const auto confirmed =
      tg::decode_get_updates(call(fake, "getUpdates", tg::encode_get_updates(second + 1, 0s)).body);
  REQUIRE(confirmed);
  CHECK(confirmed->messages.empty());
  CHECK(fake.confirmed_through() == second);

  // The same message again under a new update_id (Telegram's id reset).
  const auto again = fake.repeat_update(first);
  const auto repeated =
      tg::decode_get_updates(call(fake, "getUpdates", tg::encode_get_updates(second + 1, 0s)).body);
  REQUIRE(repeated);
  REQUIRE(repeated->messages.size() == 1);
  CHECK(repeated->messages[0].update_id == again);
  CHECK(repeated->messages[0].text == "one");
}

TEST_CASE("fake telegram: a newer getUpdates ends a waiting one with 409",
          "[net][telegram][fake]") {
  fake_telegram fake;
  net::http_client_response older;
  std::thread poller([&] { older = call(fake, "getUpdates", tg::encode_get_updates(0, 20s)); });
  REQUIRE(wait_until([&] { return fake.waiting_polls() == 1; }, 10s));
  const auto newer = call(fake, "getUpdates", tg::encode_get_updates(0, 0s));
  poller.join();
  CHECK(classified(newer).ok());
  CHECK(older.status == 409);
  CHECK(classified(older).kind == tg::answer_kind::conflict);
}

TEST_CASE("fake telegram: HTML that Telegram cannot parse is refused, plain text is sent",
          "[net][telegram][fake]") {
  fake_telegram fake;
  const auto broken = call(fake, "sendMessage", send_body(5, "<b>bold", true));
  CHECK(broken.status == 400);
  CHECK(classified(broken).kind == tg::answer_kind::parse_entities);
  CHECK(classified(broken).description.find("start tag \"b\"") != std::string::npos);
  const auto plain = call(fake, "sendMessage", send_body(5, "<b>bold", false));
  const auto sent = classified(plain);
  REQUIRE(sent.ok());
  CHECK(sent.message_id == 100);
  REQUIRE(fake.sent().size() == 1);
  CHECK(fake.sent()[0].text == "<b>bold");
  CHECK(fake.sent()[0].parse_mode.empty());
}

TEST_CASE("fake telegram: converted Markdown is accepted as HTML", "[net][telegram][fake]") {
  fake_telegram fake;
  const auto html =
      channel::markdown_to_telegram_html("# Plan\n**Bold** and _it_ with `a<b` & "
                                         "[link](https://x.io/?a=1&b=2)\n```cpp\nint x = 1 < 2;\n"
                                         "```\n*unclosed <tag>");
  CHECK_FALSE(telegram_html_problem(html).has_value());
  const auto answer = call(fake, "sendMessage", send_body(5, html, true));
  CHECK(classified(answer).ok());
}

TEST_CASE("fake telegram: texts are checked against Telegram's length limit",
          "[net][telegram][fake]") {
  fake_telegram fake;
  CHECK(call(fake, "sendMessage", send_body(5, std::string(4096, 'a'), false)).status == 200);
  const auto long_one = call(fake, "sendMessage", send_body(5, std::string(4097, 'a'), false));
  CHECK(long_one.status == 400);
  CHECK(classified(long_one).description == "Bad Request: message is too long");
  // Entities count as one character: 4,000 "&amp;" are 4,000 characters.
  std::string amps;
  for (int i = 0; i < 4000; ++i) {
    amps += "&amp;";
  }
  CHECK(call(fake, "sendMessage", send_body(5, amps, true)).status == 200);
  CHECK(call(fake, "sendMessage", send_body(5, " ", false)).status == 400);
}

TEST_CASE("fake telegram: sendMessage refuses the General topic id", "[net][telegram][fake]") {
  fake_telegram fake;
  const auto general =
      call(fake, "sendMessage", R"({"chat_id":-100,"message_thread_id":1,"text":"x"})");
  CHECK(general.status == 400);
  CHECK(classified(general).description == "Bad Request: message thread not found");
  CHECK(classified(call(fake, "sendMessage", send_body(-100, "x", false, tg::general_topic))).ok());
  CHECK(classified(call(fake, "sendChatAction", tg::encode_send_chat_action(-100, 1))).ok());
}

TEST_CASE("fake telegram: injected faults answer in Telegram's shapes, then calls succeed",
          "[net][telegram][fake]") {
  fake_telegram fake;
  fake.fail("sendMessage", {telegram_fault::kind::rate_limited, 3});
  const auto limited = classified(call(fake, "sendMessage", send_body(5, "x")));
  CHECK(limited.kind == tg::answer_kind::rate_limited);
  CHECK(limited.retry_after == 3s);
  CHECK(classified(call(fake, "sendMessage", send_body(5, "x"))).ok());

  fake.fail("sendMessage", {telegram_fault::kind::parse_entities});
  CHECK(classified(call(fake, "sendMessage", send_body(5, "x"))).kind ==
        tg::answer_kind::parse_entities);
  fake.fail("sendMessage", {telegram_fault::kind::blocked});
  CHECK(classified(call(fake, "sendMessage", send_body(5, "x"))).kind ==
        tg::answer_kind::permanent);

  fake.fail_always("sendChatAction", {telegram_fault::kind::server_error});
  for (int i = 0; i < 3; ++i) {
    const auto typing = call(fake, "sendChatAction", tg::encode_send_chat_action(5, {}));
    CHECK(typing.status == 500);
    CHECK(classified(typing).kind == tg::answer_kind::server_error);
  }
  CHECK(classified(call(fake, "sendMessage", send_body(5, "y"))).ok());
  CHECK(fake.sent().size() == 2);
  CHECK(fake.calls("sendChatAction").size() == 3);
  CHECK(fake.calls("sendMessage").size() == 5);
  CHECK(fake.calls().size() == 8);
}

TEST_CASE("fake telegram: a wrong token is 401 and an unknown method 404",
          "[net][telegram][fake]") {
  fake_telegram fake;
  const auto wrong = call(fake, "getMe", "{}", "999:WRONG");
  CHECK(wrong.status == 401);
  CHECK(classified(wrong).kind == tg::answer_kind::unauthorized);
  CHECK(call(fake, "sendPigeon", "{}").status == 404);
  CHECK(classified(call(fake, "getMe", "{}")).ok());
}

TEST_CASE("fake telegram: a chat_id may be a numeric string, as Telegram takes it, and the "
          "sent hook sees the chat",
          "[net][telegram][fake]") {
  fake_telegram fake;
  std::vector<std::int64_t> chats;
  fake.on_sent([&chats](const telegram_sent& m) { chats.push_back(m.chat_id); });
  CHECK(classified(call(fake, "sendMessage", R"({"chat_id":"4242","text":"hi"})")).ok());
  CHECK(classified(call(fake, "sendChatAction", R"({"chat_id":"4242","action":"typing"})")).ok());
  const auto named = call(fake, "sendMessage", R"({"chat_id":"@nobody","text":"hi"})");
  CHECK(named.status == 400);
  REQUIRE(fake.sent().size() == 1);
  CHECK(fake.sent()[0].chat_id == 4242);
  CHECK(chats == std::vector<std::int64_t>{4242});
}

TEST_CASE("fake telegram: deleteMessage removes a sent message once", "[net][telegram][fake]") {
  fake_telegram fake;
  const auto sent = classified(call(fake, "sendMessage", send_body(5, "draft")));
  REQUIRE(sent.message_id);
  const auto body = fmt::format(R"({{"chat_id":5,"message_id":{}}})", *sent.message_id);
  CHECK(classified(call(fake, "deleteMessage", body)).ok());
  const auto again = call(fake, "deleteMessage", body);
  CHECK(again.status == 400);
  CHECK(again.body.find("message to delete not found") != std::string::npos);
  CHECK(call(fake, "deleteMessage", R"({"chat_id":5,"message_id":999})").status == 400);
  REQUIRE(fake.sent().size() == 1);
  CHECK(fake.sent()[0].deleted);
}

TEST_CASE("fake telegram: the command menu is checked as Telegram checks it and kept per scope",
          "[net][telegram][fake]") {
  fake_telegram fake;
  CHECK(classified(call(fake, "setMyCommands",
                        R"({"commands":[{"command":"help","description":"Show help."}]})"))
            .ok());
  CHECK(call(fake, "getMyCommands", "{}").body.find(R"("command":"help")") != std::string::npos);
  CHECK(call(fake, "getMyCommands", R"({"scope":{"type":"all_group_chats"}})").body ==
        R"({"ok":true,"result":[]})");
  CHECK(call(fake, "setMyCommands", R"({"commands":[{"command":"Help","description":"x"}]})")
            .status == 400);
  CHECK(
      call(fake, "setMyCommands", R"({"commands":[{"command":"help","description":""}]})").status ==
      400);
  CHECK(call(fake, "setMyCommands", "{}").status == 400);
  CHECK(classified(call(fake, "deleteMyCommands", "{}")).ok());
  CHECK(call(fake, "getMyCommands", "{}").body == R"({"ok":true,"result":[]})");
}

TEST_CASE("fake telegram: an edit with the same text is 'message is not modified'",
          "[net][telegram][fake]") {
  fake_telegram fake;
  const auto sent = classified(call(fake, "sendMessage", send_body(5, "v1")));
  REQUIRE(sent.message_id);
  CHECK(classified(
            call(fake, "editMessageText", tg::encode_edit_message_text(5, *sent.message_id, "v2")))
            .ok());
  CHECK(classified(
            call(fake, "editMessageText", tg::encode_edit_message_text(5, *sent.message_id, "v2")))
            .kind == tg::answer_kind::not_modified);
  CHECK(
      classified(call(fake, "editMessageText", tg::encode_edit_message_text(5, 9999, "v3"))).kind ==
      tg::answer_kind::permanent);
  REQUIRE(fake.sent().size() == 1);
  CHECK(fake.sent()[0].text == "v2");
  CHECK(fake.sent()[0].edits == 1);
}

TEST_CASE("fake telegram: with a webhook set, getUpdates conflicts and updates are POSTed "
          "with the secret",
          "[net][telegram][fake]") {
  // The receiving end: net's HTTP server, recording what arrives.
  call_log received;
  net::router routes;
  routes.add(net::http_method::post, "/hook", [&received](net::request_context& ctx) {
    const auto& r = ctx.request();
    received.add({"hook", r.headers, r.body, 200, "", std::chrono::steady_clock::now()});
    return [](bool ok) -> asio::awaitable<net::http_response> {
      co_return net::http_response::json(ok ? 200 : 403, "{}");
    }(tg::verify_secret_token(r.header(tg::secret_token_header), "s3cret_token-1"));
  });
  loopback_server receiver(std::move(routes), "receiver");

  fake_telegram fake;
  CHECK(classified(call(fake, "setWebhook",
                        [&] {
                          tg::webhook_settings hook;
                          hook.url = receiver.origin() + "/hook";
                          hook.secret_token = "s3cret_token-1";
                          return tg::encode_set_webhook(hook);
                        }()))
            .ok());
  CHECK(fake.webhook_url() == receiver.origin() + "/hook");
  CHECK(classified(call(fake, "getUpdates", "{}")).kind == tg::answer_kind::conflict);

  const auto id = fake.push_message(incoming(42, "via webhook"));
  for (int i = 0; i < 3; ++i) {
    const auto delivered = fake.deliver_webhook(id);
    REQUIRE(delivered);
    CHECK(delivered->status == 200);
  }
  const auto hooks = received.of("hook");
  REQUIRE(hooks.size() == 3);
  CHECK(hooks[0].header(tg::secret_token_header) == "s3cret_token-1");
  CHECK(hooks[0].body == hooks[2].body);
  const auto update = tg::decode_webhook_update(hooks[0].body);
  REQUIRE(update);
  REQUIRE(update->messages.size() == 1);
  CHECK(update->messages[0].update_id == id);
  CHECK(update->messages[0].text == "via webhook");

  CHECK(call(fake, "setWebhook", R"({"url":"http://x","secret_token":"bad token!"})").status ==
        400);
  CHECK(classified(call(fake, "deleteWebhook", "{}")).ok());
  CHECK(classified(call(fake, "getUpdates", "{}")).ok());
}

TEST_CASE("the HTML check finds what Telegram refuses", "[net][telegram][fake]") {
  CHECK_FALSE(telegram_html_problem("<b>a</b> &lt; <a href=\"x\">y</a> &#128512; AT&T"));
  CHECK(telegram_html_problem("<b>a</i>") ==
        "Unmatched end tag at byte offset 4, expected \"</b>\", found \"</i>\"");
  CHECK(telegram_html_problem("<foo>") == "Unsupported start tag \"foo\" at byte offset 0");
  CHECK(telegram_html_problem("a < b") == "Unclosed start tag at byte offset 2");
  CHECK(telegram_html_problem("</b>") == "Unexpected end tag at byte offset 0");
  CHECK(telegram_visible_text("<b>x</b> &lt;&amp;&#65;") == "x <&A");
}
