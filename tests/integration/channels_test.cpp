// The generic webhook channel end to end, with the real `troupe serve` binary, a scripted
// mock-llm and a local HTTP receiver standing in for the channel's callback_url: a round
// trip, platform redeliveries answered once, a bad token refused with nothing journaled,
// a 429 from the receiver honoured, dead letters visible over the API, and a redelivery
// after a restart not answered again.

#include <atomic>
#include <csignal>
#include <map>
#include <regex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/callback_receiver.hpp"
#include "support/raw_http.hpp"
#include "support/wait_until.hpp"
#include "support/webhook_channel.hpp"
#include "troupe/mock/mock_llm_server.hpp"
#include "troupe/runtime/crypto.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

constexpr auto channel_token = webhook_channel_token;

troupe::mock::mock_llm_options scripted_mock() {
  const auto script = R"([
    {"match": {"user": "hello"}, "reply": {"text": "Hi there"}},
    {"match": {"user": "second"}, "reply": {"text": "Second answer"}}
  ])";
  return scripted(script);
}

std::string config(const mock_llm_fixture& mock, const callback_receiver& receiver) {
  return webhook_channel_config(mock.base_url(), receiver.url());
}

struct channel_node {
  mock_llm_fixture mock{scripted_mock()};
  callback_receiver receiver;
  api_server server{"rate_per_second = 1000\nrate_burst = 1000\n", config(mock, receiver)};

  std::string deliver(const std::string& message_id, const std::string& text,
                      const std::string& token = channel_token,
                      const std::string& thread = "t-1") const {
    return deliver_webhook(server.port(), thread, "alice", message_id, text, token);
  }
  std::string channel() const {
    return body_of(server.call("GET", "/api/v1/channels/hooks", server.admin()));
  }
};

} // namespace

TEST_CASE("a webhook message is answered once at the callback URL, signed",
          "[integration][channels]") {
  channel_node node;
  REQUIRE(node.server.port() != 0);
  const auto answer = node.deliver("m-1", "hello");
  CHECK(status_of(answer) == 200);
  REQUIRE(wait_until([&] { return node.receiver.accepted() == 1; }, 30s));
  const auto reply = node.receiver.requests().front();
  CHECK(json_field(reply.body, "text") == "Hi there");
  CHECK(json_field(reply.body, "thread") == "t-1");
  CHECK(json_field(reply.body, "channel") == "hooks");
  CHECK(json_field(reply.body, "part") == "0");
  const auto signature = "sha256=" + troupe::to_hex(troupe::hmac_sha256(channel_token, reply.body));
  CHECK(reply.header("X-Troupe-Signature") == signature);
  CHECK(reply.header("X-Troupe-Idempotency-Key") == json_field(reply.body, "run_id") + ":0");

  // The thread is bound to a conversation owned by the thread's identity (thread scope).
  const auto threads =
      node.server.call("GET", "/api/v1/channels/hooks/threads", node.server.admin());
  CHECK(status_of(threads) == 200);
  CHECK(json_field(body_of(threads), "thread_key") == "t-1");
  CHECK(json_field(body_of(threads), "owner") == "channel-thread:hooks:t-1");
  CHECK_FALSE(json_field(body_of(threads), "conversation_id").empty());
  // The channel's view: one part sent, its token never shown.
  const auto view = node.channel();
  CHECK(json_field(view, "sent") == "1");
  CHECK(json_field(view, "token_set") == "false"); // inline in the config, not stored
  CHECK(view.find(channel_token) == std::string::npos);
}

TEST_CASE("a message delivered three times is answered once", "[integration][channels]") {
  channel_node node;
  for (int i = 0; i < 3; ++i) {
    CHECK(status_of(node.deliver("m-1", "hello")) == 200);
  }
  // A later message of the same thread is answered after the first one (in order), so
  // once its reply is in, any duplicate reply of the first would be too.
  CHECK(status_of(node.deliver("m-2", "second")) == 200);
  REQUIRE(wait_until([&] { return node.receiver.accepted() >= 2; }, 30s));
  const auto requests = node.receiver.requests();
  REQUIRE(requests.size() == 2);
  CHECK(json_field(requests[0].body, "text") == "Hi there");
  CHECK(json_field(requests[1].body, "text") == "Second answer");
  CHECK(node.mock.stats().completion_requests == 2);
}

TEST_CASE("a webhook with a bad token is 401 and journals nothing", "[integration][channels]") {
  channel_node node;
  const auto refused = node.deliver("m-1", "hello", "wrong-token");
  CHECK(status_of(refused) == 401);
  const auto missing = http_exchange(node.server.port(), "POST", "/api/v1/webhooks/channels/hooks",
                                     R"({"sender":"a","message_id":"m-1","text":"hello"})",
                                     "Content-Type: application/json\r\n");
  CHECK(status_of(missing) == 401);
  // Nothing was journaled: no message in the journal, no thread, no model call...
  CHECK(json_field(node.channel(), "messages") == "0");
  CHECK(json_field(
            body_of(node.server.call("GET", "/api/v1/channels/hooks/threads", node.server.admin())),
            "total") == "0");
  CHECK(node.mock.stats().completion_requests == 0);
  // ...so the same message id with the right token is new, and answered.
  CHECK(status_of(node.deliver("m-1", "hello")) == 200);
  REQUIRE(wait_until([&] { return node.receiver.accepted() == 1; }, 30s));
  CHECK(node.mock.stats().completion_requests == 1);
  CHECK(json_field(node.channel(), "messages") == "1");
  // An unknown channel is 404; a malformed body 400.
  CHECK(status_of(http_exchange(node.server.port(), "POST", "/api/v1/webhooks/channels/nope", "{}",
                                "X-Webhook-Token: x\r\n")) == 404);
  CHECK(status_of(http_exchange(node.server.port(), "POST", "/api/v1/webhooks/channels/hooks",
                                R"({"text":"no ids"})",
                                std::string("X-Webhook-Token: ") + channel_token + "\r\n")) == 400);
}

TEST_CASE("the outbox retries a 429 from the callback after its Retry-After",
          "[integration][channels]") {
  channel_node node;
  node.receiver.script({{429, "1", R"({"error":"rate limited"})"}});
  CHECK(status_of(node.deliver("m-1", "hello")) == 200);
  REQUIRE(wait_until([&] { return node.receiver.accepted() == 1; }, 30s));
  const auto arrivals = node.receiver.arrivals();
  REQUIRE(arrivals.size() == 2);
  CHECK(arrivals[1] - arrivals[0] >= 950ms);
  const auto requests = node.receiver.requests();
  // The same part both times: same body, same idempotency key.
  CHECK(requests[0].body == requests[1].body);
  CHECK(requests[0].header("X-Troupe-Idempotency-Key") ==
        requests[1].header("X-Troupe-Idempotency-Key"));
  CHECK(json_field(node.channel(), "sent") == "1");
}

TEST_CASE("a reply the callback refuses for good is a dead letter visible over the API",
          "[integration][channels]") {
  channel_node node;
  node.receiver.script({{400, "", R"({"error":"unknown thread"})"}});
  CHECK(status_of(node.deliver("m-1", "hello")) == 200);
  REQUIRE(wait_until([&] { return json_field(node.channel(), "dead") == "1"; }, 30s));
  const auto view = node.channel();
  CHECK(json_field(view, "text") == "Hi there");
  CHECK_THAT(json_field(view, "last_error"), Catch::StartsWith("HTTP 400"));
  CHECK(node.receiver.count() == 1); // a permanent failure is not retried
}

TEST_CASE("after a restart a journaled message delivered again is not answered twice",
          "[integration][channels]") {
  channel_node node;
  CHECK(status_of(node.deliver("m-1", "hello")) == 200);
  REQUIRE(wait_until([&] { return node.receiver.accepted() == 1; }, 30s));
  // Stopped at once: the reply may still be on its way back (the receiver counts it
  // before it answers); the stop records it, so it is not sent again.
  node.server.restart(SIGTERM);
  REQUIRE(node.server.port() != 0);
  CHECK(status_of(node.deliver("m-1", "hello")) == 200);
  CHECK(status_of(node.deliver("m-2", "second")) == 200);
  REQUIRE(wait_until([&] { return node.receiver.accepted() >= 2; }, 30s));
  const auto requests = node.receiver.requests();
  REQUIRE(requests.size() == 2);
  CHECK(json_field(requests[1].body, "text") == "Second answer");
  CHECK(node.mock.stats().completion_requests == 2);
  // Both messages went to the one conversation of the thread.
  const auto threads =
      body_of(node.server.call("GET", "/api/v1/channels/hooks/threads", node.server.admin()));
  CHECK(json_field(threads, "total") == "1");
}

TEST_CASE("channels are created, read, changed and deleted over the API, secrets write-only",
          "[integration][channels]") {
  channel_node node;
  const auto& admin = node.server.admin();
  auto created = node.server.call("POST", "/api/v1/channels", admin,
                                  R"({"name":"api-hook","type":"webhook","agent":"helper",)"
                                  R"("token":"api-secret","callback_url":")" +
                                      node.receiver.url() + R"("})");
  REQUIRE(status_of(created) == 201);
  CHECK(json_field(body_of(created), "token_set") == "true");
  CHECK(body_of(created).find("api-secret") == std::string::npos);
  CHECK(status_of(node.server.call("POST", "/api/v1/channels", admin,
                                   R"({"name":"api-hook","type":"webhook","agent":"helper",)"
                                   R"("token":"x","callback_url":"http://127.0.0.1:1/"})")) == 409);
  CHECK(status_of(node.server.call(
            "POST", "/api/v1/channels", admin,
            R"({"name":"bad","type":"webhook","agent":"helper",)"
            R"("token_env":"HOME","callback_url":"http://127.0.0.1:1/"})")) == 400);
  CHECK(status_of(node.server.call("POST", "/api/v1/channels", admin,
                                   R"({"name":"x","type":"webhook","agent":"nobody",)"
                                   R"("token":"t","callback_url":"http://127.0.0.1:1/"})")) == 400);
  // The sealed token verifies inbound requests.
  const std::string body = R"({"sender":"bob","message_id":"a-1","text":"hello"})";
  CHECK(status_of(http_exchange(node.server.port(), "POST", "/api/v1/webhooks/channels/api-hook",
                                body, "X-Webhook-Token: wrong\r\n")) == 401);
  CHECK(status_of(http_exchange(node.server.port(), "POST", "/api/v1/webhooks/channels/api-hook",
                                body, "X-Webhook-Token: api-secret\r\n")) == 200);
  REQUIRE(wait_until([&] { return node.receiver.accepted() == 1; }, 30s));

  auto listed = node.server.call("GET", "/api/v1/channels", admin);
  CHECK(status_of(listed) == 200);
  CHECK(json_field(body_of(listed), "total") == "2");
  // Paged in SQL by name: "api-hook" before "hooks".
  auto second = node.server.call("GET", "/api/v1/channels?limit=1&offset=1", admin);
  REQUIRE(status_of(second) == 200);
  CHECK(json_field(body_of(second), "total") == "2");
  CHECK_THAT(body_of(second),
             Catch::Contains(R"("name":"hooks")") && !Catch::Contains(R"("name":"api-hook")"));
  CHECK(status_of(node.server.call("GET", "/api/v1/channels?limit=0", admin)) == 400);
  auto disabled =
      node.server.call("PATCH", "/api/v1/channels/api-hook", admin, R"({"enabled":false})");
  REQUIRE(status_of(disabled) == 200);
  CHECK(json_field(body_of(disabled), "enabled") == "false");
  CHECK(status_of(http_exchange(node.server.port(), "POST", "/api/v1/webhooks/channels/api-hook",
                                body, "X-Webhook-Token: api-secret\r\n")) == 404);
  // A declared channel is changed in the config, not over the API.
  CHECK(status_of(node.server.call("PATCH", "/api/v1/channels/hooks", admin,
                                   R"({"enabled":false})")) == 409);
  CHECK(status_of(node.server.call("DELETE", "/api/v1/channels/hooks", admin)) == 409);
  CHECK(status_of(node.server.call("DELETE", "/api/v1/channels/api-hook", admin)) == 204);
  CHECK(status_of(node.server.call("GET", "/api/v1/channels/api-hook", admin)) == 404);
  // Admin only.
  const auto user = node.server.user_token("ann");
  CHECK(status_of(node.server.call("GET", "/api/v1/channels", user)) == 403);
}

TEST_CASE(
    "a thousand threads with five messages each, delivered at once, are all answered, in order "
    "per thread, none twice",
    "[integration][channels][load]") {
  constexpr int threads = 1'000;
  constexpr int per_thread = 5;
  constexpr int senders = 40; // concurrent deliverers, each owning threads/senders threads
  mock_llm_fixture mock;      // the default answer repeats the message: "… reply N to: <text>"
  callback_receiver receiver;
  api_server server("rate_per_second = 1000000\nrate_burst = 1000000\n",
                    webhook_channel_config(mock.base_url(), receiver.url(), R"(["finish"])", 120,
                                           "queue_policy = \"followup\"\n"));
  REQUIRE(server.port() != 0);

  // Each sender delivers the first message of each of its threads, then the second, …:
  // within a thread in order (a 200 means journaled), across threads all at once.
  std::vector<std::thread> workers;
  std::atomic<int> refused{0};
  for (int w = 0; w < senders; ++w) {
    workers.emplace_back([&, w] {
      for (int m = 0; m < per_thread; ++m) {
        for (int t = w; t < threads; t += senders) {
          const auto text = fmt::format("t{}-m{}", t, m);
          const auto answer = deliver_webhook(server.port(), fmt::format("t{}", t),
                                              fmt::format("s{}", t), text, text);
          if (status_of(answer) != 200) {
            refused.fetch_add(1);
          }
        }
      }
    });
  }
  for (auto& w : workers) {
    w.join();
  }
  REQUIRE(refused.load() == 0);
  REQUIRE(wait_until([&] { return receiver.accepted() >= threads * per_thread; }, 300s));

  // Every reply names its thread and repeats its message; per thread the messages come
  // back 0, 1, 2, 3, 4.
  std::map<std::string, std::vector<int>> answered;
  const std::regex echoed(R"(to: t([0-9]+)-m([0-9]+))");
  for (const auto& reply : receiver.requests()) {
    const auto text = json_field(reply.body, "text");
    std::smatch m;
    INFO("reply text: " << text);
    REQUIRE(std::regex_search(text, m, echoed));
    CHECK(json_field(reply.body, "thread") == "t" + m[1].str());
    answered["t" + m[1].str()].push_back(std::stoi(m[2].str()));
  }
  CHECK(receiver.count() == static_cast<std::size_t>(threads * per_thread)); // none twice
  REQUIRE(answered.size() == static_cast<std::size_t>(threads));
  for (const auto& [thread, order] : answered) {
    INFO("thread " << thread);
    CHECK(order == std::vector<int>{0, 1, 2, 3, 4});
  }
  CHECK(mock.stats().completion_requests == static_cast<std::uint64_t>(threads * per_thread));
}

TEST_CASE("a troupe killed mid-run answers the message exactly once after its restart",
          "[integration][channels]") {
  auto options = scripted_mock();
  // "hold" is answered in ten minutes: long after the troupe waiting for it is killed.
  auto held = troupe::mock::parse_mock_script(
      R"([{"match": {"user": "hold"}, "ttft_ms": 600000, "reply": {"text": "too late"}}])");
  REQUIRE(held);
  options.rules.insert(options.rules.begin(), held->begin(), held->end());
  mock_llm_fixture mock(std::move(options));
  callback_receiver receiver;
  api_server server("rate_per_second = 1000\nrate_burst = 1000\n", config(mock, receiver));
  const auto deliver = [&](const std::string& id, const std::string& text) {
    return deliver_webhook(server.port(), "t-1", "alice", id, text);
  };
  REQUIRE(status_of(deliver("m-1", "hold")) == 200);
  REQUIRE(wait_until([&] { return mock.stats().completion_requests == 1; }, 30s));

  server.restart(SIGKILL);
  REQUIRE(server.port() != 0);
  // The platform delivers it again (it may have seen no answer), and a next message.
  CHECK(status_of(deliver("m-1", "hold")) == 200);
  CHECK(status_of(deliver("m-2", "hello")) == 200);
  REQUIRE(wait_until([&] { return receiver.accepted() >= 2; }, 30s));
  // Answered once: the interrupted message with a notice (its run is not made again,
  // which could repeat what its tools did), the next one by the model.
  const auto requests = receiver.requests();
  REQUIRE(requests.size() == 2);
  CHECK_THAT(json_field(requests[0].body, "text"), Catch::Contains("interrupted by a restart"));
  CHECK(json_field(requests[1].body, "text") == "Hi there");
  CHECK(mock.stats().completion_requests == 2);
  // The receiver answers before troupe records the part sent.
  const auto channel_view = [&] {
    return body_of(server.call("GET", "/api/v1/channels/hooks", server.admin()));
  };
  CHECK(wait_until([&] { return json_field(channel_view(), "sent") == "2"; }, 30s));
  CHECK(json_field(channel_view(), "dead") == "0");
}

TEST_CASE("a SIGTERM while a reply is being sent waits for the send, records it sent, and it is "
          "never sent again",
          "[integration][channels]") {
  channel_node node;
  // The receiver takes 7 s to answer: longer than a stop used to give a thread (5 s),
  // shorter than a send's deadline (15 s).
  node.receiver.script({{200, "", R"({"ok":true})", 7s}});
  CHECK(status_of(node.deliver("m-1", "hello")) == 200);
  REQUIRE(wait_until([&] { return node.receiver.count() == 1; }, 30s));
  const auto stopping = std::chrono::steady_clock::now();
  node.server.restart(SIGTERM);
  // The stop waited for the answer.
  CHECK(std::chrono::steady_clock::now() - stopping >= 6s);
  REQUIRE(node.server.port() != 0);
  CHECK(json_field(node.channel(), "sent") == "1");
  CHECK(json_field(node.channel(), "pending") == "0");
  CHECK(status_of(node.deliver("m-2", "second")) == 200);
  REQUIRE(wait_until([&] { return node.receiver.accepted() >= 2; }, 30s));
  const auto requests = node.receiver.requests();
  REQUIRE(requests.size() == 2);
  CHECK(json_field(requests[0].body, "text") == "Hi there");
  CHECK(json_field(requests[1].body, "text") == "Second answer");
}
