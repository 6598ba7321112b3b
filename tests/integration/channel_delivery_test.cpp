// How channels take deliveries, end to end with the real `troupe serve` binary, a
// scripted mock-llm and the platform fakes: the platform is answered as soon as the
// journal row is durable (well under Slack's 3 s) while a run of the thread is held,
// nothing of what was acknowledged is lost; a journal write that takes longer than 2 s
// is answered 503 (the platform delivers again) and, committed later, still answered
// once; and both dedupe keys of a platform (Telegram's chat + message id and update_id,
// Slack's channel + ts and event_id) drop a redelivery, also across a restart.

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/callback_receiver.hpp"
#include "support/fake_slack.hpp"
#include "support/fake_telegram.hpp"
#include "support/raw_http.hpp"
#include "support/wait_until.hpp"
#include "support/webhook_channel.hpp"
#include "support/write_lock.hpp"
#include "troupe/mock/mock_llm_server.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

constexpr auto signing_secret = "delivery-signing-secret-0001";
/// What "at once" means for an acknowledgement on loopback: generous, and still a third
/// of what Slack allows.
constexpr auto prompt_ack = 1s;

troupe::mock::mock_llm_options scripted_mock() {
  const auto script = R"([
    {"match": {"user": "hold"}, "ttft_ms": 600000, "reply": {"text": "too late"}},
    {"match": {"user": "hello"}, "reply": {"text": "Hi there"}},
    {"match": {"user": "second"}, "reply": {"text": "Second answer"}},
    {"match": {"user": "third"}, "reply": {"text": "Third answer"}}
  ])";
  return scripted(script);
}

std::string agent_config(const mock_llm_fixture& mock) {
  return mock_provider_toml(mock) +
         "[[agents]]\nname = \"helper\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n"
         "tools = [\"finish\"]\ntimeout_s = 900\n";
}

std::string view(const api_server& s, const std::string& channel) {
  return body_of(s.call("GET", "/api/v1/channels/" + channel, s.admin()));
}

/// The journal's message count of a channel (its view's `journal.messages`).
std::string journaled(const api_server& s, const std::string& channel) {
  return json_field(view(s, channel), "messages");
}

/// How long `deliver` took, and its status.
template <class Deliver> std::pair<int, std::chrono::milliseconds> timed(Deliver deliver) {
  const auto start = std::chrono::steady_clock::now();
  const int status = deliver();
  return {status, std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)};
}

const fake_slack& with_slack_secrets(const fake_slack& fake) {
  ::setenv("TROUPE_KEY_SLACK_BOT", fake.bot_token().c_str(), 1);
  ::setenv("TROUPE_KEY_SLACK_SIGNING", signing_secret, 1);
  return fake;
}

std::string slack_channel(const fake_slack& fake) {
  return "[[channels]]\nname = \"team\"\ntype = \"slack\"\nagent = \"helper\"\n"
         "bot_token_env = \"TROUPE_KEY_SLACK_BOT\"\n"
         "signing_secret_env = \"TROUPE_KEY_SLACK_SIGNING\"\napi_base = \"" +
         fake.api_base() + "\"\n";
}

slack_event_sender::message slack_message(std::string event_id, std::string text, std::string ts,
                                          std::string thread_ts = {}) {
  slack_event_sender::message m;
  m.event_id = std::move(event_id);
  m.text = std::move(text);
  m.ts = std::move(ts);
  m.thread_ts = std::move(thread_ts);
  return m;
}

/// A Telegram channel "tgw" in webhook mode, created over the API.
void create_telegram_webhook(const api_server& server, const fake_telegram& fake) {
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

/// POSTs `body` to channel "tgw" with Telegram's secret header, as Telegram would.
int post_telegram(const api_server& server, const fake_telegram& fake, const std::string& body) {
  return status_of(http_exchange(server.port(), "POST", "/api/v1/webhooks/channels/tgw", body,
                                 "Content-Type: application/json\r\n"
                                 "X-Telegram-Bot-Api-Secret-Token: " +
                                     fake.webhook_secret() + "\r\n"));
}

/// Update `update_id`'s body with its message's id changed to `message_id`.
std::string with_message_id(std::string body, std::int64_t from, std::int64_t to) {
  const auto needle = fmt::format("\"message_id\":{},", from);
  const auto at = body.find(needle);
  REQUIRE(at != std::string::npos);
  body.replace(at, needle.size(), fmt::format("\"message_id\":{},", to));
  return body;
}

} // namespace

TEST_CASE("webhook deliveries are acknowledged at once while a run of their thread is held, "
          "and none is lost",
          "[integration][channels][delivery]") {
  mock_llm_fixture mock{scripted_mock()};
  callback_receiver receiver;
  api_server server("rate_per_second = 1000\nrate_burst = 1000\n",
                    webhook_channel_config(mock.base_url(), receiver.url(), R"(["finish"])", 900));
  REQUIRE(status_of(deliver_webhook(server.port(), "t-held", "alice", "h-1", "hold")) == 200);
  REQUIRE(wait_until([&] { return mock.stats().completion_requests == 1; }, 30s));
  // The held thread takes more (queued behind its run) and other threads go on: every
  // delivery is acknowledged well within Slack's 3 s.
  std::chrono::milliseconds slowest{0};
  for (int i = 0; i < 10; ++i) {
    const auto [held, held_took] = timed([&] {
      return status_of(deliver_webhook(server.port(), "t-held", "alice", fmt::format("h-q{}", i),
                                       fmt::format("queued {}", i)));
    });
    const auto [other, other_took] = timed([&] {
      return status_of(deliver_webhook(server.port(), fmt::format("t-{}", i), "bob",
                                       fmt::format("o-{}", i), "hello"));
    });
    CHECK(held == 200);
    CHECK(other == 200);
    slowest = std::max({slowest, held_took, other_took});
  }
  INFO("the slowest acknowledgement took " << slowest.count() << " ms");
  CHECK(slowest < prompt_ack);
  // Nothing lost: the other threads are answered, and all 21 messages are journaled, the
  // held thread's waiting behind its run.
  REQUIRE(wait_until([&] { return receiver.accepted() >= 10; }, 60s));
  CHECK(receiver.count() == 10);
  CHECK(journaled(server, "hooks") == "21");
  const auto v = view(server, "hooks");
  CHECK(json_field(v, "done") == "10");
}

TEST_CASE("slack events are acknowledged at once while a run of their thread is held",
          "[integration][channels][delivery][slack]") {
  mock_llm_fixture mock{scripted_mock()};
  fake_slack fake;
  api_server server("rate_per_second = 1000\nrate_burst = 1000\n",
                    agent_config(mock) + slack_channel(with_slack_secrets(fake)));
  REQUIRE(fake.wait_for_calls("auth.test", 1, 30s));
  slack_event_sender events(signing_secret, "http://127.0.0.1:" + std::to_string(server.port()) +
                                                "/api/v1/webhooks/channels/team");
  const auto send = [&](const slack_event_sender::message& m) {
    auto answer = events.send(slack_event_sender::event_body(m));
    REQUIRE(answer);
    return static_cast<int>(answer->status);
  };
  REQUIRE(send(slack_message("Ev0", "hold", "1700000000.000001")) == 200);
  REQUIRE(wait_until([&] { return mock.stats().completion_requests == 1; }, 30s));
  std::chrono::milliseconds slowest{0};
  for (int i = 0; i < 10; ++i) {
    const auto [held, held_took] = timed([&] {
      return send(slack_message(fmt::format("EvQ{}", i), fmt::format("queued {}", i),
                                fmt::format("1700000001.{:06}", i), "1700000000.000001"));
    });
    const auto [other, other_took] = timed([&] {
      return send(
          slack_message(fmt::format("EvO{}", i), "hello", fmt::format("1700000002.{:06}", i)));
    });
    CHECK(held == 200);
    CHECK(other == 200);
    slowest = std::max({slowest, held_took, other_took});
  }
  INFO("the slowest acknowledgement took " << slowest.count() << " ms");
  CHECK(slowest < prompt_ack);
  REQUIRE(fake.wait_for_posts(10, 60s));
  CHECK(journaled(server, "team") == "21");
}

TEST_CASE("telegram webhook updates are acknowledged at once while a run of their chat is held",
          "[integration][channels][delivery][telegram]") {
  mock_llm_fixture mock{scripted_mock()};
  fake_telegram fake;
  api_server server("rate_per_second = 1000\nrate_burst = 1000\n", agent_config(mock));
  create_telegram_webhook(server, fake);
  telegram_incoming m;
  m.text = "hold";
  const auto held = fake.push_message(m);
  REQUIRE(fake.deliver_webhook(held)->status == 200);
  REQUIRE(wait_until([&] { return mock.stats().completion_requests == 1; }, 30s));
  std::chrono::milliseconds slowest{0};
  for (int i = 0; i < 10; ++i) {
    m.chat_id = 1001;
    m.from_id = 1001;
    m.text = fmt::format("queued {}", i);
    const auto queued = fake.push_message(m);
    m.chat_id = 2000 + i;
    m.from_id = 2000 + i;
    m.text = "hello";
    const auto other = fake.push_message(m);
    for (const auto id : {queued, other}) {
      const auto [status, took] = timed([&] {
        auto answer = fake.deliver_webhook(id);
        REQUIRE(answer);
        return static_cast<int>(answer->status);
      });
      CHECK(status == 200);
      slowest = std::max(slowest, took);
    }
  }
  INFO("the slowest acknowledgement took " << slowest.count() << " ms");
  CHECK(slowest < prompt_ack);
  REQUIRE(fake.wait_for_sent(10, 60s));
  CHECK(journaled(server, "tgw") == "21");
}

TEST_CASE("a journal write held past 2 s is answered 503, and once it commits the message is "
          "answered once, its redelivery dropped",
          "[integration][channels][delivery]") {
  mock_llm_fixture mock{scripted_mock()};
  callback_receiver receiver;
  api_server server("rate_per_second = 1000\nrate_burst = 1000\n",
                    webhook_channel_config(mock.base_url(), receiver.url()));
  REQUIRE(server.port() != 0);
  std::optional<write_lock> lock(std::in_place, server.data_dir() / "troupe.db");
  const auto [status, took] = timed(
      [&] { return status_of(deliver_webhook(server.port(), "t-1", "alice", "m-1", "hello")); });
  CHECK(status == 503);
  CHECK(took >= 1900ms);
  CHECK(took < 3s);
  // The write was waiting on the lock, not dropped: it commits once the lock goes, and
  // the message is handed to its thread then.
  lock.reset();
  REQUIRE(wait_until([&] { return receiver.accepted() == 1; }, 30s));
  CHECK(json_field(receiver.requests()[0].body, "text") == "Hi there");
  // The platform delivers it again (it saw a 503): a duplicate, acknowledged, not answered.
  CHECK(status_of(deliver_webhook(server.port(), "t-1", "alice", "m-1", "hello")) == 200);
  CHECK(status_of(deliver_webhook(server.port(), "t-1", "alice", "m-2", "second")) == 200);
  REQUIRE(wait_until([&] { return receiver.accepted() >= 2; }, 30s));
  CHECK(receiver.count() == 2);
  CHECK(json_field(receiver.requests()[1].body, "text") == "Second answer");
  CHECK(mock.stats().completion_requests == 2);
  CHECK(journaled(server, "hooks") == "2");
}

TEST_CASE("telegram: an update delivered again under its update_id or its chat and message id "
          "is answered once, also after a restart",
          "[integration][channels][delivery][telegram]") {
  mock_llm_fixture mock{scripted_mock()};
  fake_telegram fake;
  api_server server("rate_per_second = 1000\nrate_burst = 1000\n", agent_config(mock));
  create_telegram_webhook(server, fake);
  telegram_incoming m;
  m.text = "hello";
  const auto first = fake.push_message(m); // message 10 of chat 1001
  const auto body = fake.update_json(first);
  REQUIRE(post_telegram(server, fake, body) == 200);
  // The same update_id, carrying another message id: dropped by the update_id.
  const auto same_update = with_message_id(body, 10, 77);
  CHECK(post_telegram(server, fake, same_update) == 200);
  // The same chat and message under a new update_id: dropped by the message key.
  const auto same_message = fake.repeat_update(first);
  CHECK(fake.deliver_webhook(same_message)->status == 200);
  // A new message of the chat is answered after the first: any duplicate would be in.
  m.text = "second";
  const auto second = fake.push_message(m);
  CHECK(fake.deliver_webhook(second)->status == 200);
  REQUIRE(fake.wait_for_sent(2, 30s));
  REQUIRE(wait_until([&] { return json_field(view(server, "tgw"), "sent") == "2"; }, 30s));
  CHECK(journaled(server, "tgw") == "2");

  server.restart(SIGTERM);
  REQUIRE(server.port() != 0);
  // Telegram keeps the webhook's URL; the restarted node listens elsewhere, so the
  // updates go to it directly, with the same secret.
  CHECK(post_telegram(server, fake, same_update) == 200);
  CHECK(post_telegram(server, fake, body) == 200);
  CHECK(post_telegram(server, fake, fake.update_json(same_message)) == 200);
  m.text = "third";
  const auto third = fake.push_message(m);
  CHECK(post_telegram(server, fake, fake.update_json(third)) == 200);
  REQUIRE(fake.wait_for_sent(3, 30s));
  const auto sent = fake.sent();
  REQUIRE(sent.size() == 3);
  CHECK(sent[0].text == "Hi there");
  CHECK(sent[1].text == "Second answer");
  CHECK(sent[2].text == "Third answer");
  CHECK(mock.stats().completion_requests == 3);
  CHECK(journaled(server, "tgw") == "3");
}

TEST_CASE("slack: an event delivered again under its event_id or its channel and ts is answered "
          "once, also after a restart",
          "[integration][channels][delivery][slack]") {
  mock_llm_fixture mock{scripted_mock()};
  fake_slack fake;
  api_server server("rate_per_second = 1000\nrate_burst = 1000\n",
                    agent_config(mock) + slack_channel(with_slack_secrets(fake)));
  REQUIRE(fake.wait_for_calls("auth.test", 1, 30s));
  const auto events = [&] {
    return slack_event_sender(signing_secret, "http://127.0.0.1:" + std::to_string(server.port()) +
                                                  "/api/v1/webhooks/channels/team");
  };
  const auto send = [&](const slack_event_sender::message& m) {
    auto answer = events().send(slack_event_sender::event_body(m));
    REQUIRE(answer);
    return static_cast<int>(answer->status);
  };
  const auto thread = std::string("1700000000.000100");
  const auto first = slack_message("Ev1", "hello", thread);
  REQUIRE(send(first) == 200);
  // The same event_id with another ts: dropped by the event_id.
  const auto same_event = slack_message("Ev1", "hello", "1700000000.000999", thread);
  CHECK(send(same_event) == 200);
  // The same message (channel and ts) under another event_id: dropped by the message key.
  const auto same_message = slack_message("Ev1b", "hello", thread);
  CHECK(send(same_message) == 200);
  CHECK(send(slack_message("Ev2", "second", "1700000001.000200", thread)) == 200);
  REQUIRE(fake.wait_for_posts(2, 30s));
  REQUIRE(wait_until([&] { return json_field(view(server, "team"), "sent") == "2"; }, 30s));
  CHECK(journaled(server, "team") == "2");

  server.restart(SIGTERM);
  REQUIRE(server.port() != 0);
  REQUIRE(fake.wait_for_calls("auth.test", 2, 30s));
  for (const auto& again : {first, same_event, same_message}) {
    CHECK(send(again) == 200);
  }
  CHECK(send(slack_message("Ev3", "third", "1700000002.000300", thread)) == 200);
  REQUIRE(fake.wait_for_posts(3, 30s));
  const auto posts = fake.posts();
  REQUIRE(posts.size() == 3);
  CHECK(posts[0].text == "Hi there");
  CHECK(posts[1].text == "Second answer");
  CHECK(posts[2].text == "Third answer");
  CHECK(mock.stats().completion_requests == 3);
  CHECK(journaled(server, "team") == "3");
}
