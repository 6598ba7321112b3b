#include <chrono>
#include <string>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "mock_llm_fixture.hpp"
#include "support/callback_receiver.hpp"
#include "troupe/net/channel/webhook_adapter.hpp"
#include "troupe/runtime/crypto.hpp"

// g++ 12 at -O2 reports -Wmismatched-new-delete for Asio coroutine frames it inlines: a
// known false positive (awaitable_frame_base pairs its own operator new and delete).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

using namespace troupe;
using namespace troupe::net;
using namespace troupe::net::channel;
using namespace std::chrono_literals;
using troupe::test::callback_receiver;
using troupe::test::run_until_done;

namespace {

http_request inbound(std::string token, std::string body) {
  http_request r;
  r.method = http_method::post;
  r.path = "/api/v1/webhooks/channels/hooks";
  if (!token.empty()) {
    r.headers.push_back({"X-Webhook-Token", std::move(token)});
  }
  r.body = std::move(body);
  return r;
}

outbound_part part_of(std::string text) {
  outbound_part p;
  p.reply_to = "t-1";
  p.thread_key = "t-1";
  p.run_id = "run-1";
  p.part = 0;
  p.text = std::move(text);
  return p;
}

} // namespace

TEST_CASE("the webhook adapter accepts only its own token", "[net][channels]") {
  const webhook_adapter adapter("hooks", "s3cret", "http://127.0.0.1:1/replies");
  CHECK(adapter.verify(inbound("s3cret", "{}")));
  for (const auto* wrong : {"", "s3cre", "s3cret ", "S3CRET", "s3cretx"}) {
    INFO(wrong);
    auto refused = adapter.verify(inbound(wrong, "{}"));
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == errc::permission_denied);
  }
  // No configured token never verifies, not even an empty header.
  const webhook_adapter unset("hooks", "", "http://127.0.0.1:1/replies");
  CHECK_FALSE(unset.verify(inbound("", "{}")));
}

TEST_CASE("the webhook adapter decodes {thread, sender, message_id, text}", "[net][channels]") {
  const webhook_adapter adapter("hooks", "s3cret", "http://127.0.0.1:1/replies");
  auto decoded = adapter.decode(
      inbound("s3cret", R"({"thread":"t-1","sender":"alice","message_id":"m-1","text":"hi"})"));
  REQUIRE(decoded);
  REQUIRE(decoded->messages.size() == 1);
  const auto& m = decoded->messages.front();
  CHECK(m.thread == "t-1");
  CHECK(m.sender == "alice");
  CHECK(m.message_id == "m-1");
  CHECK(m.text == "hi");
  CHECK(m.reply_to == "t-1");
  // The thread is optional: the sender then keys the conversation.
  auto no_thread =
      adapter.decode(inbound("s3cret", R"({"sender":"bob","message_id":"m-2","text":"yo"})"));
  REQUIRE(no_thread);
  CHECK(no_thread->messages.front().thread.empty());

  for (const auto* bad : {R"({"sender":"a","text":"x"})", R"({"message_id":"m","text":"x"})",
                          R"({"sender":"a","message_id":"m"})",
                          R"({"sender":"a","message_id":7,"text":"x"})", "[1,2]", "not json"}) {
    INFO(bad);
    auto refused = adapter.decode(inbound("s3cret", bad));
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == errc::invalid_argument);
  }
}

TEST_CASE("the webhook adapter posts a signed reply to the callback URL", "[net][channels]") {
  callback_receiver receiver;
  webhook_adapter adapter("hooks", "s3cret", receiver.url());
  asio::io_context io;
  http_client http(io.get_executor());
  auto result = run_until_done(io, adapter.send(http, part_of("hello <b>"), 5s));
  CHECK(result.outcome == send_outcome::sent);
  REQUIRE(receiver.count() == 1);
  const auto request = receiver.requests().front();
  CHECK(request.body == adapter.outbound_body(part_of("hello <b>")));
  CHECK(request.body ==
        R"({"channel":"hooks","thread":"t-1","run_id":"run-1","part":0,"text":"hello <b>"})");
  // The receiver can check the signature with the shared token.
  const auto expected_signature = "sha256=" + to_hex(hmac_sha256("s3cret", request.body));
  CHECK(request.header("X-Troupe-Signature") == expected_signature);
  CHECK(request.header("X-Troupe-Idempotency-Key") == "run-1:0");
  CHECK(request.header("Content-Type") == "application/json");
}

TEST_CASE("the webhook adapter classifies the receiver's answers", "[net][channels]") {
  callback_receiver receiver;
  receiver.script({{429, "3", R"({"error":"slow down"})"}, {503, "", "down"}, {400, "", "bad"}});
  webhook_adapter adapter("hooks", "s3cret", receiver.url());
  asio::io_context io;
  http_client http(io.get_executor());
  auto limited = run_until_done(io, adapter.send(http, part_of("x"), 5s));
  CHECK(limited.outcome == send_outcome::retry);
  CHECK(limited.retry_after == 3s);
  CHECK_THAT(limited.error, Catch::StartsWith("HTTP 429"));
  auto down = run_until_done(io, adapter.send(http, part_of("x"), 5s));
  CHECK(down.outcome == send_outcome::retry);
  CHECK(down.retry_after == 0ms);
  auto refused = run_until_done(io, adapter.send(http, part_of("x"), 5s));
  CHECK(refused.outcome == send_outcome::failed);
  CHECK_THAT(refused.error, Catch::StartsWith("HTTP 400"));
  // Nobody listening: a retry, not a failure.
  webhook_adapter nowhere("hooks", "s3cret", "http://127.0.0.1:1/replies");
  auto unreachable = run_until_done(io, nowhere.send(http, part_of("x"), 2s));
  CHECK(unreachable.outcome == send_outcome::retry);
  CHECK_FALSE(unreachable.error.empty());
}

TEST_CASE("HTTP statuses classify as sent, retry or failed", "[net][channels]") {
  CHECK(classify_http_status(200, "", "").outcome == send_outcome::sent);
  CHECK(classify_http_status(204, "", "").outcome == send_outcome::sent);
  CHECK(classify_http_status(429, "1.5", "").retry_after == 1500ms);
  CHECK(classify_http_status(408, "", "").outcome == send_outcome::retry);
  CHECK(classify_http_status(500, "", "").outcome == send_outcome::retry);
  CHECK(classify_http_status(403, "", "").outcome == send_outcome::failed);
  CHECK(classify_http_status(404, "", "").outcome == send_outcome::failed);
}
