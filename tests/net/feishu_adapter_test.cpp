#include <chrono>
#include <string>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "support/fake_feishu.hpp"
#include "support/run_until_done.hpp"
#include "troupe/net/channel/feishu_adapter.hpp"
#include "troupe/net/channel/feishu_wire.hpp"

// g++ 12 at -O2 reports -Wmismatched-new-delete for Asio coroutine frames it inlines: a
// known false positive (awaitable_frame_base pairs its own operator new and delete).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

using namespace troupe;
using namespace troupe::net;
using namespace troupe::net::channel;
using namespace std::chrono_literals;
using troupe::test::fake_feishu;
using troupe::test::feishu_event_sender;
using troupe::test::feishu_fault;
using troupe::test::run_until_done;

namespace {

constexpr auto verification = "fake-verification-token";
constexpr auto encrypt_key = "fake-encrypt-key";

feishu_options options_for(std::string api_base, std::string key = encrypt_key) {
  feishu_options o;
  o.channel = "lark";
  o.app_id = "cli_fake";
  o.app_secret = "fake-app-secret";
  o.verification_token = verification;
  o.encrypt_key = std::move(key);
  o.api_base = std::move(api_base);
  return o;
}

/// The request a sender would POST, as troupe's server hands it to the adapter.
http_request as_received(const http_client_request& sent) {
  http_request r;
  r.method = http_method::post;
  r.path = "/api/v1/webhooks/channels/lark";
  r.headers = sent.headers;
  r.body = sent.body;
  return r;
}

feishu_event_sender::message text_message(std::string id, std::string text) {
  feishu_event_sender::message m;
  m.event_id = "ev-" + id;
  m.message_id = "om_" + id;
  m.text = std::move(text);
  return m;
}

outbound_part part_of(std::string reply_to, std::string text, std::int64_t part = 0) {
  outbound_part p;
  p.part = part;
  p.reply_to = std::move(reply_to);
  p.thread_key = "oc_fakechat";
  p.run_id = "run-1";
  p.text = std::move(text);
  return p;
}

} // namespace

TEST_CASE("feishu signatures and decryption match independently computed vectors",
          "[net][channels][feishu]") {
  // python3 -c 'import hashlib; print(hashlib.sha256(b"1700000000" b"nonce123"
  //   b"encrypt-key" b"{\"encrypt\":\"abc\"}").hexdigest())'
  CHECK(feishu::sign("1700000000", "nonce123", "encrypt-key", R"({"encrypt":"abc"})") ==
        "309266d1b5fcf5ea481f9498a34e6f2cd221058bba48b1e466e385a56b613c84");
  CHECK(
      feishu::verify_signature("1700000000", "nonce123", "encrypt-key", R"({"encrypt":"abc"})",
                               "309266d1b5fcf5ea481f9498a34e6f2cd221058bba48b1e466e385a56b613c84"));
  CHECK_FALSE(
      feishu::verify_signature("1700000001", "nonce123", "encrypt-key", R"({"encrypt":"abc"})",
                               "309266d1b5fcf5ea481f9498a34e6f2cd221058bba48b1e466e385a56b613c84"));
  // Feishu's documented example: encrypt key "test key".
  CHECK(feishu::decrypt("test key", "P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk=")
            .value_or("error") == "hello world");
  CHECK_FALSE(feishu::decrypt("other key", "P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk=")
                  .value_or("error") == "hello world");
  CHECK_FALSE(feishu::decrypt("test key", "not base64!"));
  CHECK_FALSE(feishu::decrypt("test key", "P37w+VZImNgPEO1RBhJ6Rg=="));
  const auto sealed = feishu::encrypt("k", "0123456789abcdef", R"({"a":1})");
  CHECK(feishu::decrypt("k", sealed).value_or("error") == R"({"a":1})");
}

TEST_CASE("feishu events decode into text messages without their mentions",
          "[net][channels][feishu]") {
  CHECK(feishu::strip_mentions("@_user_1 hello @_user_22 there ") == "hello there");
  CHECK(feishu::strip_mentions("@_user_1") == "");
  CHECK(feishu::strip_mentions("mail @_user_x stays") == "mail @_user_x stays");
  feishu_event_sender sender("http://unused", verification, "");
  auto m = text_message("1", "@_user_1 what is 2+2?");
  m.thread_id = "omt_topic";
  const auto ev = feishu::decode_event(sender.event_body(m));
  REQUIRE(ev);
  CHECK(ev->type == feishu::event::kind::message);
  CHECK(ev->token == verification);
  CHECK(ev->event_id == "ev-1");
  CHECK(ev->message_id == "om_1");
  CHECK(ev->text == "what is 2+2?");
  CHECK(ev->sender == "ou_fakeuser");
  const auto challenge = feishu::decode_event(sender.url_verification_body("ch-1"));
  REQUIRE(challenge);
  CHECK(challenge->type == feishu::event::kind::url_verification);
  CHECK(challenge->challenge == "ch-1");
  for (const auto* bad : {"", "[]", "{\"header\":{\"event_type\":\"im.message.receive_v1\"}}",
                          "{\"type\":\"url_verification\"}"}) {
    CHECK_FALSE(feishu::decode_event(bad));
  }
}

TEST_CASE("the feishu adapter verifies the signature and the verification token",
          "[net][channels][feishu]") {
  feishu_adapter adapter(options_for("http://127.0.0.1:1/open-apis"));
  feishu_event_sender sender("http://unused", verification, encrypt_key);
  const auto body = sender.event_body(text_message("1", "hi"));
  CHECK(adapter.verify(as_received(sender.request(body, {}))));
  feishu_event_sender::delivery forged;
  forged.wrong_signing_key = "another-key";
  CHECK_FALSE(adapter.verify(as_received(sender.request(body, forged))));
  feishu_event_sender::delivery unsigned_request;
  unsigned_request.unsigned_request = true;
  CHECK_FALSE(adapter.verify(as_received(sender.request(body, unsigned_request))));
  // Signed and encrypted with the right key, but carrying another app's token.
  feishu_event_sender other_app("http://unused", "another-token", encrypt_key);
  const auto other_body = other_app.event_body(text_message("2", "hi"));
  const auto refused = adapter.verify(as_received(other_app.request(other_body, {})));
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == errc::permission_denied);
  // A tampered body fails the signature.
  auto tampered = as_received(sender.request(body, {}));
  tampered.body.insert(tampered.body.size() - 2, "A");
  CHECK_FALSE(adapter.verify(tampered));
}

TEST_CASE("the feishu adapter answers url_verification, plain and encrypted, in decode",
          "[net][channels][feishu]") {
  for (const std::string key : {"", encrypt_key}) {
    feishu_adapter adapter(options_for("http://127.0.0.1:1/open-apis", key));
    feishu_event_sender sender("http://unused", verification, key);
    feishu_event_sender::delivery how;
    how.unsigned_request = true; // a challenge may come unsigned
    const auto request = as_received(sender.request(sender.url_verification_body("ch-9"), how));
    REQUIRE(adapter.verify(request));
    const auto decoded = adapter.decode(request);
    REQUIRE(decoded);
    CHECK(decoded->messages.empty());
    CHECK(decoded->response_body == R"({"challenge":"ch-9"})");
  }
}

TEST_CASE("the feishu adapter decodes a message into its chat, topic and reply target",
          "[net][channels][feishu]") {
  feishu_adapter adapter(options_for("http://127.0.0.1:1/open-apis"));
  feishu_event_sender sender("http://unused", verification, encrypt_key);
  auto m = text_message("5", "@_user_1 hello");
  auto decoded = adapter.decode(as_received(sender.request(sender.event_body(m), {})));
  REQUIRE(decoded);
  REQUIRE(decoded->messages.size() == 1);
  const auto& in = decoded->messages.front();
  CHECK(in.message_id == "om_5");
  CHECK(in.delivery_id == "event:ev-5");
  CHECK(in.thread == "oc_fakechat");
  CHECK(in.text == "hello");
  CHECK(in.reply_to == "om_5");
  m.root_id = "om_root";
  decoded = adapter.decode(as_received(sender.request(sender.event_body(m), {})));
  REQUIRE(decoded);
  CHECK(decoded->messages.at(0).thread == "oc_fakechat:om_root");
  // The bot's own messages, images and bare mentions are acknowledged, not answered.
  m.sender_type = "app";
  CHECK(adapter.decode(as_received(sender.request(sender.event_body(m), {})))->messages.empty());
  m.sender_type = "user";
  m.message_type = "image";
  CHECK(adapter.decode(as_received(sender.request(sender.event_body(m), {})))->messages.empty());
  m.message_type = "text";
  m.text = "@_user_1";
  CHECK(adapter.decode(as_received(sender.request(sender.event_body(m), {})))->messages.empty());
}

TEST_CASE("the feishu adapter replies with a cached tenant token and refreshes a refused one",
          "[net][channels][feishu]") {
  fake_feishu feishu;
  feishu_adapter adapter(options_for(feishu.api_base()));
  asio::io_context io;
  http_client http(io.get_executor());
  auto r = run_until_done(io, adapter.send(http, part_of("om_1", "first"), 5s));
  CHECK(r.outcome == send_outcome::sent);
  CHECK(r.platform_message_id.starts_with("om_fake_"));
  r = run_until_done(io, adapter.send(http, part_of("om_2", "second", 1), 5s));
  CHECK(r.outcome == send_outcome::sent);
  CHECK(feishu.calls("token").size() == 1);
  // The platform expires the token: the part is sent with a new one, in the same send.
  feishu.expire_tokens();
  r = run_until_done(io, adapter.send(http, part_of("om_3", "third", 2), 5s));
  CHECK(r.outcome == send_outcome::sent);
  CHECK(feishu.calls("token").size() == 2);
  const auto replies = feishu.replies();
  REQUIRE(replies.size() == 3);
  CHECK(replies[2].parent_id == "om_3");
  CHECK(replies[2].text == "third");
  CHECK(feishu.calls("token").front().body ==
        R"({"app_id":"cli_fake","app_secret":"fake-app-secret"})");
  const auto calls = feishu.calls("reply");
  REQUIRE(calls.size() == 4); // the third part twice: refused, then sent
  CHECK(calls[0].header("Authorization") == calls[1].header("Authorization"));
  CHECK(calls[2].header("Authorization") == calls[1].header("Authorization"));
  CHECK(calls[3].header("Authorization") != calls[2].header("Authorization"));
  CHECK(calls[2].answer.find("99991663") != std::string::npos);
}

TEST_CASE("the feishu adapter retries rate limits after the platform's hint and 5xx",
          "[net][channels][feishu]") {
  fake_feishu feishu;
  feishu_adapter adapter(options_for(feishu.api_base()));
  asio::io_context io;
  http_client http(io.get_executor());
  feishu.fail("reply", {feishu_fault::kind::rate_limited, 7});
  auto r = run_until_done(io, adapter.send(http, part_of("om_1", "x"), 5s));
  CHECK(r.outcome == send_outcome::retry);
  CHECK(r.retry_after == 7s);
  feishu.fail("reply", {feishu_fault::kind::server_error});
  r = run_until_done(io, adapter.send(http, part_of("om_1", "x"), 5s));
  CHECK(r.outcome == send_outcome::retry);
  feishu.fail("token", {feishu_fault::kind::server_error});
  feishu.expire_tokens();
  r = run_until_done(io, adapter.send(http, part_of("om_1", "x"), 5s));
  CHECK(r.outcome == send_outcome::retry);
  CHECK_THAT(r.error, Catch::Contains("tenant access token"));
  r = run_until_done(io, adapter.send(http, part_of("om_1", "x"), 5s));
  CHECK(r.outcome == send_outcome::sent);
  // The same part again (the outbox's retry after a lost answer): one reply on Feishu.
  r = run_until_done(io, adapter.send(http, part_of("om_1", "x"), 5s));
  CHECK(r.outcome == send_outcome::sent);
  CHECK(feishu.replies().size() == 1);
  // A long answer is split at 4,000 characters.
  const auto parts = adapter.split(std::string(9'000, 'a'));
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].size() <= feishu::message_limit);
}
