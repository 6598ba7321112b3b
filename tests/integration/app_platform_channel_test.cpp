// The channels of the platforms that reply with a fetched access token — Feishu/Lark and
// DingTalk — end to end: the real `troupe serve` binary, a scripted mock-llm, the fake
// platforms (support/fake_feishu.hpp, support/fake_dingtalk.hpp) and callbacks made as
// the platforms make them. The cases every such platform must pass are written once,
// over a node per platform (TEMPLATE_TEST_CASE); each platform's own (Feishu's
// url_verification, DingTalk's expired session webhook) follow.

#include <csignal>
#include <cstdlib>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/fake_dingtalk.hpp"
#include "support/fake_feishu.hpp"
#include "support/long_answer.hpp"
#include "support/raw_http.hpp"
#include "support/redeliver.hpp"
#include "support/wait_until.hpp"
#include "troupe/mock/mock_llm_server.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

constexpr auto verification_token = "fake-verification-token";
constexpr auto encrypt_key = "fake-encrypt-key";

/// More than a DingTalk part (5,000) and a Feishu part (4,000) hold.
std::string long_answer() {
  return troupe::test::long_answer(6);
}

troupe::mock::mock_llm_options scripted_mock() {
  const auto script = R"([
    {"match": {"user": "hello"}, "reply": {"text": "Hi there"}},
    {"match": {"user": "second"}, "reply": {"text": "Second answer"}},
    {"match": {"user": "long"}, "reply": {"text": ")" +
                      json_escaped(long_answer()) + R"("}}
  ])";
  return scripted(script);
}

std::string agent_config(const mock_llm_fixture& mock) {
  return mock_provider_toml(mock) +
         "[[agents]]\nname = \"helper\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n"
         "tools = [\"finish\"]\ntimeout_s = 60\n";
}

std::string route(const api_server& server) {
  return "http://127.0.0.1:" + std::to_string(server.port()) + "/api/v1/webhooks/channels/im";
}

/// Feishu, encrypted and signed.
struct feishu_platform {
  static constexpr std::string_view name = "feishu";
  static constexpr std::size_t limit = 4000;
  fake_feishu fake;

  std::string channel_toml() {
    ::setenv("TROUPE_KEY_FEISHU_SECRET", fake.app_secret().c_str(), 1);
    ::setenv("TROUPE_KEY_FEISHU_VERIFY", verification_token, 1);
    ::setenv("TROUPE_KEY_FEISHU_ENCRYPT", encrypt_key, 1);
    return "[[channels]]\nname = \"im\"\ntype = \"feishu\"\nagent = \"helper\"\n"
           "app_id = \"" +
           fake.app_id() +
           "\"\napp_secret_env = \"TROUPE_KEY_FEISHU_SECRET\"\n"
           "verification_token_env = \"TROUPE_KEY_FEISHU_VERIFY\"\n"
           "encrypt_key_env = \"TROUPE_KEY_FEISHU_ENCRYPT\"\napi_base = \"" +
           fake.api_base() + "\"\n";
  }
  /// Delivers message `id` with `text` (`forged`: signed with another key).
  unsigned deliver(const api_server& server, const std::string& id, const std::string& text,
                   bool forged = false) {
    feishu_event_sender sender(route(server), verification_token, encrypt_key);
    feishu_event_sender::message m;
    m.event_id = "ev-" + id;
    m.message_id = "om_" + id;
    m.text = text;
    feishu_event_sender::delivery how;
    if (forged) {
      how.wrong_signing_key = "not-the-key";
    }
    auto answer = sender.send(sender.event_body(m), how);
    REQUIRE(answer);
    return answer->status;
  }
  std::vector<std::string> replies() const {
    std::vector<std::string> out;
    for (const auto& r : fake.replies()) {
      out.push_back(r.text);
    }
    return out;
  }
  bool wait_for_replies(std::size_t n) const {
    return fake.wait_for_replies(n, 30s);
  }
  std::size_t token_fetches() const {
    return fake.calls("token").size();
  }
  void expire_tokens() {
    fake.expire_tokens();
  }
};

/// DingTalk, replying through each message's session webhook.
struct dingtalk_platform {
  static constexpr std::string_view name = "dingtalk";
  static constexpr std::size_t limit = 5000;
  fake_dingtalk fake;
  /// Give messages an expired session webhook (replies then use the send API).
  bool expired_sessions = false;

  std::string channel_toml() {
    ::setenv("TROUPE_KEY_DINGTALK_SECRET", fake.app_secret().c_str(), 1);
    return "[[channels]]\nname = \"im\"\ntype = \"dingtalk\"\nagent = \"helper\"\n"
           "app_key = \"" +
           fake.app_key() + "\"\napp_secret_env = \"TROUPE_KEY_DINGTALK_SECRET\"\napi_base = \"" +
           fake.api_base() + "\"\n";
  }
  unsigned deliver(const api_server& server, const std::string& id, const std::string& text,
                   bool forged = false) {
    dingtalk_callback_sender sender(route(server), fake.app_secret());
    dingtalk_callback_sender::message m;
    m.msg_id = "msg" + id;
    m.text = text;
    const auto session = fake.new_session(expired_sessions ? -1s : 90min);
    m.session_webhook = session.url;
    m.session_webhook_expires_ms = session.expires_ms;
    dingtalk_callback_sender::delivery how;
    if (forged) {
      how.wrong_secret = "not-the-secret";
    }
    auto answer = sender.send(dingtalk_callback_sender::callback_body(m), how);
    REQUIRE(answer);
    return answer->status;
  }
  std::vector<std::string> replies() const {
    std::vector<std::string> out;
    for (const auto& s : fake.sends()) {
      out.push_back(s.text);
    }
    return out;
  }
  bool wait_for_replies(std::size_t n) const {
    return fake.wait_for_sends(n, 30s);
  }
  std::size_t token_fetches() const {
    return fake.calls("token").size();
  }
  void expire_tokens() {
    fake.expire_tokens();
  }
};

template <class Platform> struct node {
  mock_llm_fixture mock;
  Platform platform;
  api_server server;

  explicit node(troupe::mock::mock_llm_options o = scripted_mock())
      : mock(std::move(o)), server("rate_per_second = 1000\nrate_burst = 1000\n",
                                   agent_config(mock) + platform.channel_toml()) {}

  /// One message as the platform delivers it: again after a 503 (support/redeliver.hpp).
  unsigned deliver(const std::string& id, const std::string& text, bool forged = false) {
    return deliver_until_acknowledged([&] { return platform.deliver(server, id, text, forged); });
  }
  std::string channel() const {
    return body_of(server.call("GET", "/api/v1/channels/im", server.admin()));
  }
};

} // namespace

TEMPLATE_TEST_CASE("token platforms: a message is answered once, with the platform's token",
                   "[integration][channels][feishu][dingtalk]", feishu_platform,
                   dingtalk_platform) {
  node<TestType> n;
  CHECK(n.deliver("1", "hello") == 200);
  REQUIRE(n.platform.wait_for_replies(1));
  CHECK(n.platform.replies() == std::vector<std::string>{"Hi there"});
  CHECK(json_field(body_of(n.server.call("GET", "/api/v1/channels/im/threads", n.server.admin())),
                   "total") == "1");
  // The channel's view never shows a secret.
  CHECK(n.channel().find(n.platform.fake.app_secret()) == std::string::npos);
}

TEMPLATE_TEST_CASE("token platforms: a forged callback is 401 and journals nothing",
                   "[integration][channels][feishu][dingtalk]", feishu_platform,
                   dingtalk_platform) {
  node<TestType> n;
  CHECK(n.deliver("1", "hello", true) == 401);
  CHECK(status_of(http_exchange(n.server.port(), "POST", "/api/v1/webhooks/channels/im",
                                R"({"msgId":"x","text":{"content":"hello"}})",
                                "Content-Type: application/json\r\n")) == 401);
  CHECK(json_field(n.channel(), "messages") == "0");
  CHECK(n.mock.stats().completion_requests == 0);
  // The same message, made as the platform makes it, is new and answered.
  CHECK(n.deliver("1", "hello") == 200);
  REQUIRE(n.platform.wait_for_replies(1));
  CHECK(n.mock.stats().completion_requests == 1);
}

TEMPLATE_TEST_CASE("token platforms: a message delivered three times is answered once",
                   "[integration][channels][feishu][dingtalk]", feishu_platform,
                   dingtalk_platform) {
  node<TestType> n;
  for (int i = 0; i < 3; ++i) {
    CHECK(n.deliver("1", "hello") == 200);
  }
  // A second message of the same thread: its answer comes after the first one's.
  CHECK(n.deliver("2", "second") == 200);
  REQUIRE(n.platform.wait_for_replies(2));
  REQUIRE(wait_until([&] { return json_field(n.channel(), "sent") == "2"; }, 30s));
  CHECK(n.platform.replies() == std::vector<std::string>{"Hi there", "Second answer"});
  CHECK(n.mock.stats().completion_requests == 2);
}

TEMPLATE_TEST_CASE("token platforms: a long answer is split at the platform's limit",
                   "[integration][channels][feishu][dingtalk]", feishu_platform,
                   dingtalk_platform) {
  node<TestType> n;
  CHECK(n.deliver("1", "long") == 200);
  REQUIRE(n.platform.wait_for_replies(2));
  REQUIRE(wait_until([&] { return json_field(n.channel(), "pending") == "0"; }, 30s));
  const auto replies = n.platform.replies();
  REQUIRE(replies.size() >= 2);
  std::string joined;
  for (const auto& r : replies) {
    CHECK(r.size() <= TestType::limit);
    joined += (joined.empty() ? "" : "\n\n") + r;
  }
  CHECK(joined == long_answer());
}

TEMPLATE_TEST_CASE("token platforms: an expired access token is refreshed without losing the "
                   "reply",
                   "[integration][channels][feishu][dingtalk]", feishu_platform,
                   dingtalk_platform) {
  node<TestType> n;
  if constexpr (std::is_same_v<TestType, dingtalk_platform>) {
    n.platform.expired_sessions = true; // the send API, which takes the token
  }
  CHECK(n.deliver("1", "hello") == 200);
  REQUIRE(n.platform.wait_for_replies(1));
  CHECK(n.platform.token_fetches() == 1);
  n.platform.expire_tokens();
  CHECK(n.deliver("2", "second") == 200);
  REQUIRE(n.platform.wait_for_replies(2));
  CHECK(n.platform.token_fetches() == 2);
  CHECK(n.platform.replies() == std::vector<std::string>{"Hi there", "Second answer"});
  REQUIRE(wait_until([&] { return json_field(n.channel(), "sent") == "2"; }, 30s));
  CHECK(json_field(n.channel(), "dead") == "0");
}

TEMPLATE_TEST_CASE("token platforms: a troupe killed mid-run answers exactly once after its "
                   "restart",
                   "[integration][channels][feishu][dingtalk]", feishu_platform,
                   dingtalk_platform) {
  // "hold" is answered in ten minutes: long after the troupe waiting for it is killed.
  node<TestType> n(holding(scripted_mock()));
  CHECK(n.deliver("1", "hold") == 200);
  REQUIRE(wait_until([&] { return n.mock.stats().completion_requests == 1; }, 30s));
  n.server.restart(SIGKILL);
  REQUIRE(n.server.port() != 0);
  // The platform pushes the message again (it may have seen no answer); a next one follows.
  CHECK(n.deliver("1", "hold") == 200);
  CHECK(n.deliver("2", "hello") == 200);
  REQUIRE(n.platform.wait_for_replies(2));
  REQUIRE(wait_until([&] { return json_field(n.channel(), "pending") == "0"; }, 30s));
  const auto replies = n.platform.replies();
  REQUIRE(replies.size() == 2);
  CHECK_THAT(replies[0], Catch::Contains("interrupted by a restart"));
  CHECK(replies[1] == "Hi there");
  CHECK(n.mock.stats().completion_requests == 2);
}

TEST_CASE("feishu: url_verification is answered with its challenge, plain and encrypted, "
          "within a second",
          "[integration][channels][feishu]") {
  node<feishu_platform> n;
  feishu_event_sender encrypted(route(n.server), verification_token, encrypt_key);
  feishu_event_sender::delivery how;
  how.unsigned_request = true;
  for (const auto& sender :
       {encrypted, feishu_event_sender(route(n.server), verification_token, "")}) {
    const auto start = std::chrono::steady_clock::now();
    auto answer = sender.send(sender.url_verification_body("ch-4e7a"), how);
    REQUIRE(answer);
    CHECK(std::chrono::steady_clock::now() - start < 1s);
    CHECK(answer->status == 200);
    CHECK(json_field(answer->body, "challenge") == "ch-4e7a");
  }
  // Another app's token is refused, even for a challenge.
  feishu_event_sender other(route(n.server), "another-token", "");
  auto refused = other.send(other.url_verification_body("ch-x"));
  REQUIRE(refused);
  CHECK(refused->status == 401);
  CHECK(json_field(n.channel(), "messages") == "0");
}

TEST_CASE("feishu: a reply is the message reply API's, answering the message",
          "[integration][channels][feishu]") {
  node<feishu_platform> n;
  CHECK(n.deliver("abc", "hello") == 200);
  REQUIRE(n.platform.wait_for_replies(1));
  const auto reply = n.platform.fake.replies().at(0);
  CHECK(reply.parent_id == "om_abc");
  CHECK(reply.uuid.size() == 40);
  // The reply is recorded before the fake logs the call it answered.
  REQUIRE(n.platform.fake.wait_for_calls("reply", 1, 30s));
  const auto call = n.platform.fake.calls("reply").at(0);
  CHECK(call.header("Authorization").starts_with("Bearer t-fake-"));
}

TEST_CASE("dingtalk: a reply goes through the session webhook while it is valid, else the send "
          "API",
          "[integration][channels][dingtalk]") {
  node<dingtalk_platform> n;
  CHECK(n.deliver("1", "hello") == 200);
  REQUIRE(n.platform.wait_for_replies(1));
  CHECK(n.platform.fake.sends().at(0).via == "webhook");
  CHECK(n.platform.token_fetches() == 0);
  n.platform.expired_sessions = true;
  CHECK(n.deliver("2", "second") == 200);
  REQUIRE(n.platform.wait_for_replies(2));
  const auto second = n.platform.fake.sends().at(1);
  CHECK(second.via == "batchSend");
  CHECK(second.target == "staff-fake");
  CHECK(second.text == "Second answer");
  CHECK(n.platform.token_fetches() == 1);
}
