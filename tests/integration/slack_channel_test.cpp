// The Slack channel end to end: the real `troupe serve` binary, a scripted mock-llm, the
// fake Web API (support/fake_slack.hpp) and Events API deliveries signed as Slack signs
// them — url_verification, a round trip in the message's thread, redeliveries and the
// message + app_mention pair of one @-mention answered once, a 429 and a 200
// `ratelimited` honoured, other error words dead-lettered, bad signatures refused with
// nothing journaled, bots and edits ignored, a long answer split.

#include <csignal>
#include <cstdlib>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/fake_slack.hpp"
#include "support/long_answer.hpp"
#include "support/raw_http.hpp"
#include "support/wait_until.hpp"
#include "troupe/mock/mock_llm_server.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

constexpr auto signing_secret = "8f742231b10e8888abcd99yyyzzz85a5";

/// More than a Slack part holds in all.
std::string long_answer() {
  return troupe::test::long_answer(4);
}

troupe::mock::mock_llm_options scripted_mock() {
  const auto script = R"([
    {"match": {"user": "hello"}, "reply": {"text": "Hi there"}},
    {"match": {"user": "second"}, "reply": {"text": "Second answer"}},
    {"match": {"user": "bold"}, "reply": {"text": "**bold** move"}},
    {"match": {"user": "long"}, "reply": {"text": ")" +
                      json_escaped(long_answer()) + R"("}}
  ])";
  return scripted(script);
}

std::string config(const mock_llm_fixture& mock, const fake_slack& fake) {
  return mock_provider_toml(mock) +
         "[[agents]]\nname = \"helper\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n"
         "tools = [\"finish\"]\ntimeout_s = 60\n"
         "[[channels]]\nname = \"team\"\ntype = \"slack\"\nagent = \"helper\"\n"
         "bot_token_env = \"TROUPE_KEY_SLACK_BOT\"\n"
         "signing_secret_env = \"TROUPE_KEY_SLACK_SIGNING\"\napi_base = \"" +
         fake.api_base() + "\"\n";
}

/// The channel's secrets, in the environment `troupe serve` inherits.
const fake_slack& with_secrets(const fake_slack& fake) {
  ::setenv("TROUPE_KEY_SLACK_BOT", fake.bot_token().c_str(), 1);
  ::setenv("TROUPE_KEY_SLACK_SIGNING", signing_secret, 1);
  return fake;
}

struct slack_node {
  mock_llm_fixture mock{scripted_mock()};
  fake_slack fake;
  api_server server{"rate_per_second = 1000\nrate_burst = 1000\n",
                    config(mock, with_secrets(fake))};
  slack_event_sender events{signing_secret, "http://127.0.0.1:" + std::to_string(server.port()) +
                                                "/api/v1/webhooks/channels/team"};

  slack_node() {
    // The bot's user id is known (auth.test) before events arrive.
    REQUIRE(fake.wait_for_calls("auth.test", 1, 30s));
  }

  static slack_event_sender::message message(std::string event_id, std::string text,
                                             std::string ts) {
    slack_event_sender::message m;
    m.event_id = std::move(event_id);
    m.text = std::move(text);
    m.ts = std::move(ts);
    return m;
  }
  unsigned deliver(const slack_event_sender::message& m,
                   slack_event_sender::delivery how = {}) const {
    auto answer = events.send(slack_event_sender::event_body(m), how);
    REQUIRE(answer);
    return answer->status;
  }
  std::string channel() const {
    return body_of(server.call("GET", "/api/v1/channels/team", server.admin()));
  }
};

} // namespace

TEST_CASE("slack: url_verification is answered with its challenge",
          "[integration][channels][slack]") {
  slack_node node;
  auto answer = node.events.send(slack_event_sender::url_verification_body("3eZbrw1aB"));
  REQUIRE(answer);
  CHECK(answer->status == 200);
  CHECK(json_field(answer->body, "challenge") == "3eZbrw1aB");
}

TEST_CASE("slack: a message is answered once in its thread with the bot token",
          "[integration][channels][slack]") {
  slack_node node;
  CHECK(node.deliver(slack_node::message("Ev1", "hello", "1700000000.000100")) == 200);
  REQUIRE(node.fake.wait_for_calls("chat.postMessage", 1, 30s));
  const auto posts = node.fake.posts();
  REQUIRE(posts.size() == 1);
  CHECK(posts[0].channel == "C0TEST");
  CHECK(posts[0].thread_ts == "1700000000.000100");
  CHECK(posts[0].text == "Hi there");
  const auto call = node.fake.calls("chat.postMessage")[0];
  CHECK(call.header("Authorization") == "Bearer " + node.fake.bot_token());
  const auto threads =
      body_of(node.server.call("GET", "/api/v1/channels/team/threads", node.server.admin()));
  CHECK(json_field(threads, "thread_key") == "C0TEST:1700000000.000100");
  CHECK(json_field(threads, "owner") == "channel-thread:team:C0TEST:1700000000.000100");
  // A reply in the thread joins the thread's conversation and is answered there.
  auto in_thread = slack_node::message("Ev2", "second", "1700000001.000200");
  in_thread.thread_ts = "1700000000.000100";
  CHECK(node.deliver(in_thread) == 200);
  REQUIRE(node.fake.wait_for_posts(2, 30s));
  CHECK(node.fake.posts()[1].thread_ts == "1700000000.000100");
  CHECK(json_field(
            body_of(node.server.call("GET", "/api/v1/channels/team/threads", node.server.admin())),
            "total") == "1");
  CHECK(node.channel().find(node.fake.bot_token()) == std::string::npos);
}

TEST_CASE("slack: an event delivered three times and an @-mention's two events are answered once",
          "[integration][channels][slack]") {
  slack_node node;
  const auto first = slack_node::message("Ev1", "hello", "1700000000.000100");
  CHECK(node.deliver(first) == 200);
  slack_event_sender::delivery retry;
  retry.retry_num = 1;
  CHECK(node.deliver(first, retry) == 200);
  retry.retry_num = 2;
  CHECK(node.deliver(first, retry) == 200);
  // A mention in a channel: `message` and `app_mention` of one ts, two event ids (in the
  // same thread, so its answer comes after the first one's: any duplicate would be in).
  auto mention = slack_node::message("Ev2", "<@U0FAKEBOT> second", "1700000002.000300");
  mention.thread_ts = "1700000000.000100";
  CHECK(node.deliver(mention) == 200);
  mention.event_id = "Ev3";
  mention.type = "app_mention";
  CHECK(node.deliver(mention) == 200);
  REQUIRE(node.fake.wait_for_posts(2, 30s));
  REQUIRE(wait_until([&] { return json_field(node.channel(), "sent") == "2"; }, 30s));
  const auto posts = node.fake.posts();
  REQUIRE(posts.size() == 2);
  CHECK(posts[0].text == "Hi there");
  CHECK(posts[1].text == "Second answer");
  CHECK(node.mock.stats().completion_requests == 2);
}

TEST_CASE("slack: a bad or stale signature is 401 and journals nothing",
          "[integration][channels][slack]") {
  slack_node node;
  const auto m = slack_node::message("Ev1", "hello", "1700000000.000100");
  slack_event_sender::delivery forged;
  forged.wrong_secret = "not-the-secret";
  CHECK(node.deliver(m, forged) == 401);
  slack_event_sender::delivery stale;
  stale.timestamp = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count() -
                    6 * 60;
  CHECK(node.deliver(m, stale) == 401);
  CHECK(status_of(http_exchange(node.server.port(), "POST", "/api/v1/webhooks/channels/team",
                                slack_event_sender::event_body(m),
                                "Content-Type: application/json\r\n")) == 401);
  // Nothing was journaled: no message in the journal, no thread, no model call...
  CHECK(json_field(node.channel(), "messages") == "0");
  CHECK(json_field(
            body_of(node.server.call("GET", "/api/v1/channels/team/threads", node.server.admin())),
            "total") == "0");
  CHECK(node.mock.stats().completion_requests == 0);
  // ...so the same event, signed, is new and answered.
  CHECK(node.deliver(m) == 200);
  REQUIRE(node.fake.wait_for_posts(1, 30s));
  CHECK(node.mock.stats().completion_requests == 1);
}

TEST_CASE("slack: bots, the bot's own messages and edits are not answered",
          "[integration][channels][slack]") {
  slack_node node;
  auto bot = slack_node::message("Ev1", "hello", "1700000000.000100");
  bot.bot_id = "B0OTHER";
  CHECK(node.deliver(bot) == 200);
  auto own = slack_node::message("Ev2", "hello", "1700000000.000200");
  own.user = node.fake.bot_user_id();
  CHECK(node.deliver(own) == 200);
  auto edit = slack_node::message("Ev3", "hello", "1700000000.000300");
  edit.subtype = "message_changed";
  CHECK(node.deliver(edit) == 200);
  CHECK(node.deliver(slack_node::message("Ev4", "second", "1700000000.000400")) == 200);
  REQUIRE(node.fake.wait_for_posts(1, 30s));
  CHECK(node.fake.posts()[0].text == "Second answer");
  CHECK(node.mock.stats().completion_requests == 1);
}

TEST_CASE("slack: a 429 is retried after its Retry-After, once", "[integration][channels][slack]") {
  slack_node node;
  node.fake.fail("chat.postMessage", {slack_fault::kind::rate_limited, 2});
  CHECK(node.deliver(slack_node::message("Ev1", "hello", "1700000000.000100")) == 200);
  REQUIRE(node.fake.wait_for_calls("chat.postMessage", 2, 30s));
  const auto calls = node.fake.calls("chat.postMessage");
  REQUIRE(calls.size() == 2);
  CHECK(calls[0].status == 429);
  CHECK(calls[1].status == 200);
  CHECK(calls[1].at - calls[0].at >= 1950ms);
  CHECK(calls[0].body == calls[1].body);
  CHECK(node.fake.posts().size() == 1);
}

TEST_CASE("slack: ok:false is classified: ratelimited retried, channel_not_found a dead letter",
          "[integration][channels][slack]") {
  slack_node node;
  node.fake.fail("chat.postMessage", {slack_fault::kind::error_word, 0, "ratelimited"});
  CHECK(node.deliver(slack_node::message("Ev1", "hello", "1700000000.000100")) == 200);
  REQUIRE(node.fake.wait_for_calls("chat.postMessage", 2, 30s));
  CHECK(node.fake.calls("chat.postMessage")[0].status == 200);
  REQUIRE(node.fake.posts().size() == 1);
  CHECK(node.fake.posts()[0].text == "Hi there");

  node.fake.fail("chat.postMessage", {slack_fault::kind::error_word, 0, "channel_not_found"});
  CHECK(node.deliver(slack_node::message("Ev2", "second", "1700000000.000200")) == 200);
  REQUIRE(wait_until([&] { return json_field(node.channel(), "dead") == "1"; }, 30s));
  const auto view = node.channel();
  CHECK(json_field(view, "text") == "Second answer");
  CHECK_THAT(json_field(view, "last_error"), Catch::Contains("channel_not_found"));
  CHECK(node.fake.calls("chat.postMessage").size() == 3); // not retried
}

TEST_CASE("slack: a long answer is split at 3,500 characters, as mrkdwn, in the thread",
          "[integration][channels][slack]") {
  slack_node node;
  CHECK(node.deliver(slack_node::message("Ev1", "long", "1700000000.000100")) == 200);
  REQUIRE(node.fake.wait_for_posts(2, 30s));
  REQUIRE(wait_until([&] { return json_field(node.channel(), "pending") == "0"; }, 30s));
  const auto posts = node.fake.posts();
  REQUIRE(posts.size() == 2);
  std::string joined;
  for (const auto& p : posts) {
    CHECK(p.text.size() <= 3500);
    CHECK(p.thread_ts == "1700000000.000100");
    joined += (joined.empty() ? "" : "\n\n") + p.text;
  }
  CHECK(joined == long_answer());
  CHECK(node.deliver(slack_node::message("Ev2", "bold", "1700000000.000200")) == 200);
  REQUIRE(node.fake.wait_for_posts(3, 30s));
  CHECK(node.fake.posts()[2].text == "*bold* move");
}

TEST_CASE("slack: a troupe killed mid-run answers the event exactly once after its restart",
          "[integration][channels][slack]") {
  // "hold" is answered in ten minutes: long after the troupe waiting for it is killed.
  mock_llm_fixture mock(holding(scripted_mock()));
  fake_slack fake;
  api_server server("rate_per_second = 1000\nrate_burst = 1000\n",
                    config(mock, with_secrets(fake)));
  const auto events = [&] {
    return slack_event_sender(signing_secret, "http://127.0.0.1:" + std::to_string(server.port()) +
                                                  "/api/v1/webhooks/channels/team");
  };
  const auto hold = slack_node::message("Ev1", "hold", "1700000000.000100");
  auto answer = events().send(slack_event_sender::event_body(hold));
  REQUIRE(answer);
  REQUIRE(answer->status == 200);
  REQUIRE(wait_until([&] { return mock.stats().completion_requests == 1; }, 30s));

  server.restart(SIGKILL);
  REQUIRE(server.port() != 0);
  // Slack retries the event (it may have seen no answer), and a next message follows.
  slack_event_sender::delivery retry;
  retry.retry_num = 1;
  answer = events().send(slack_event_sender::event_body(hold), retry);
  REQUIRE(answer);
  CHECK(answer->status == 200);
  auto next = slack_node::message("Ev2", "hello", "1700000001.000200");
  next.thread_ts = "1700000000.000100";
  answer = events().send(slack_event_sender::event_body(next));
  REQUIRE(answer);
  CHECK(answer->status == 200);
  REQUIRE(fake.wait_for_posts(2, 30s));
  const auto posts = fake.posts();
  REQUIRE(posts.size() == 2);
  CHECK_THAT(posts[0].text, Catch::Contains("interrupted by a restart"));
  CHECK(posts[1].text == "Hi there");
  CHECK(mock.stats().completion_requests == 2);
}

TEST_CASE("slack: a slash command in a message is answered without the model, in its thread",
          "[integration][channels][slack][commands]") {
  slack_node node;
  CHECK(node.deliver(slack_node::message("Ev1", "/help", "1700000000.000100")) == 200);
  REQUIRE(node.fake.wait_for_posts(1, 30s));
  CHECK_THAT(node.fake.posts()[0].text, Catch::StartsWith("Commands:"));
  CHECK(node.fake.posts()[0].thread_ts == "1700000000.000100");
  CHECK(node.mock.stats().completion_requests == 0);
}

TEST_CASE("slack: slash commands sent form-encoded (/new, /continue) are acknowledged at once "
          "with an empty body and answered in the channel",
          "[integration][channels][slack][commands]") {
  mock_llm_fixture mock{scripted_mock()};
  fake_slack fake;
  // `sender` scope: a command (which has no thread) acts on the sender's conversation,
  // the one their messages use.
  api_server server("rate_per_second = 1000\nrate_burst = 1000\n",
                    config(mock, with_secrets(fake)) + "session_scope = \"sender\"\n");
  REQUIRE(fake.wait_for_calls("auth.test", 1, 30s));
  slack_event_sender events(signing_secret, "http://127.0.0.1:" + std::to_string(server.port()) +
                                                "/api/v1/webhooks/channels/team");
  const auto command = [&](const std::string& word, const std::string& text,
                           const std::string& trigger) {
    slack_event_sender::slash_command c;
    c.command = word;
    c.text = text;
    c.trigger_id = trigger;
    const auto start = std::chrono::steady_clock::now();
    auto answer = events.send(c);
    REQUIRE(answer);
    CHECK(std::chrono::steady_clock::now() - start < 1s);
    CHECK(answer->status == 200);
    CHECK(answer->body.empty());
  };
  auto answer = events.send(
      slack_event_sender::event_body(slack_node::message("Ev1", "hello", "1700000000.000100")));
  REQUIRE(answer);
  REQUIRE(fake.wait_for_posts(1, 30s));
  command("/new", "", "trigger.1");
  REQUIRE(fake.wait_for_posts(2, 30s));
  auto posts = fake.posts();
  CHECK(posts[1].text ==
        "Started a new conversation. The previous one is archived: /continue lists it.");
  CHECK(posts[1].channel == "C0TEST");
  CHECK(posts[1].thread_ts.empty()); // at the channel's top level
  // The same invocation again (its trigger id) is a duplicate: not answered twice.
  command("/new", "", "trigger.1");
  command("/continue", "", "trigger.2");
  REQUIRE(fake.wait_for_posts(3, 30s));
  posts = fake.posts();
  CHECK_THAT(posts[2].text, Catch::StartsWith("1. hello \xE2\x80\x94 "));
  command("/continue", "1", "trigger.3");
  REQUIRE(fake.wait_for_posts(4, 30s));
  CHECK(fake.posts()[3].text ==
        "Resumed \xE2\x80\x9Chello\xE2\x80\x9D. Carry on where you left off.");
  command("/continue", "7", "trigger.4");
  REQUIRE(fake.wait_for_posts(5, 30s));
  // The resumed one is current now, and the empty one it replaced was not archived.
  CHECK(fake.posts()[4].text == "There is no archive 7: there are no archived conversations yet.");
  // The resumed conversation takes the sender's next message.
  answer = events.send(
      slack_event_sender::event_body(slack_node::message("Ev2", "second", "1700000005.000100")));
  REQUIRE(answer);
  REQUIRE(fake.wait_for_posts(6, 30s));
  CHECK(fake.posts()[5].text == "Second answer");
  CHECK(fake.posts().size() == 6);
  CHECK(mock.stats().completion_requests == 2);
  // A forged command is refused and journals nothing.
  slack_event_sender::delivery forged;
  forged.wrong_secret = "not-the-secret";
  slack_event_sender::slash_command c;
  c.command = "/new";
  c.trigger_id = "trigger.5";
  auto refused = events.send(c, forged);
  REQUIRE(refused);
  CHECK(refused->status == 401);
  CHECK(json_field(body_of(server.call("GET", "/api/v1/channels/team", server.admin())),
                   "messages") == "6");
}
