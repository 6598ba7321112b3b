#include <chrono>
#include <string>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "support/fake_dingtalk.hpp"
#include "support/run_until_done.hpp"
#include "troupe/net/channel/dingtalk_adapter.hpp"
#include "troupe/net/channel/dingtalk_wire.hpp"

// g++ 12 at -O2 reports -Wmismatched-new-delete for Asio coroutine frames it inlines: a
// known false positive (awaitable_frame_base pairs its own operator new and delete).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

using namespace troupe;
using namespace troupe::net;
using namespace troupe::net::channel;
using namespace std::chrono_literals;
using troupe::test::dingtalk_callback_sender;
using troupe::test::dingtalk_fault;
using troupe::test::fake_dingtalk;
using troupe::test::run_until_done;

namespace {

dingtalk_options options_for(const fake_dingtalk& fake) {
  dingtalk_options o;
  o.channel = "ding";
  o.app_key = fake.app_key();
  o.app_secret = fake.app_secret();
  o.api_base = fake.api_base();
  return o;
}

http_request as_received(const http_client_request& sent) {
  http_request r;
  r.method = http_method::post;
  r.path = "/api/v1/webhooks/channels/ding";
  r.headers = sent.headers;
  r.body = sent.body;
  return r;
}

std::int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// The reply target of a message decoded from a callback.
std::string reply_to_of(dingtalk_adapter& adapter, const dingtalk_callback_sender::message& m) {
  dingtalk_callback_sender sender("http://unused", "unused");
  auto decoded =
      adapter.decode(as_received(sender.request(dingtalk_callback_sender::callback_body(m), {})));
  REQUIRE(decoded);
  REQUIRE(decoded->messages.size() == 1);
  return decoded->messages.front().reply_to;
}

outbound_part part_of(std::string reply_to, std::string text) {
  outbound_part p;
  p.reply_to = std::move(reply_to);
  p.run_id = "run-1";
  p.text = std::move(text);
  return p;
}

} // namespace

TEST_CASE("dingtalk signatures match independently computed vectors and refuse stale times",
          "[net][channels][dingtalk]") {
  // python3 -c 'import hmac,hashlib,base64; print(base64.b64encode(hmac.new(b"dt-secret",
  //   b"1700000000000\ndt-secret", hashlib.sha256).digest()).decode())'
  CHECK(dingtalk::sign("dt-secret", "1700000000000") ==
        "Ks5KundGchROaz3pffNK5hvzdR6pCQLfFcb06TVHzFc=");
  const auto at = std::chrono::system_clock::time_point(std::chrono::milliseconds(1700000000000));
  using check = dingtalk::signature_check;
  CHECK(dingtalk::verify_signature("dt-secret", "1700000000000",
                                   "Ks5KundGchROaz3pffNK5hvzdR6pCQLfFcb06TVHzFc=", at) ==
        check::valid);
  CHECK(dingtalk::verify_signature("dt-secret", "1700000000000",
                                   "Ks5KundGchROaz3pffNK5hvzdR6pCQLfFcb06TVHzFc=", at + 59min) ==
        check::valid);
  CHECK(dingtalk::verify_signature("dt-secret", "1700000000000",
                                   "Ks5KundGchROaz3pffNK5hvzdR6pCQLfFcb06TVHzFc=", at + 61min) ==
        check::stale);
  CHECK(dingtalk::verify_signature("dt-secret", "1700000000000",
                                   "Ks5KundGchROaz3pffNK5hvzdR6pCQLfFcb06TVHzFc=", at - 61min) ==
        check::stale);
  CHECK(dingtalk::verify_signature("other", "1700000000000",
                                   "Ks5KundGchROaz3pffNK5hvzdR6pCQLfFcb06TVHzFc=", at) ==
        check::mismatch);
  CHECK(dingtalk::verify_signature("dt-secret", "17e11", "x", at) == check::malformed_timestamp);
  CHECK(dingtalk::verify_signature("dt-secret", "", "x", at) == check::missing);
}

TEST_CASE("the dingtalk adapter verifies callbacks and decodes text messages",
          "[net][channels][dingtalk]") {
  fake_dingtalk fake;
  dingtalk_adapter adapter(options_for(fake));
  dingtalk_callback_sender sender("http://unused", fake.app_secret());
  dingtalk_callback_sender::message m;
  m.msg_id = "msg-1";
  m.text = "  hello robot ";
  const auto body = dingtalk_callback_sender::callback_body(m);
  CHECK(adapter.verify(as_received(sender.request(body, {}))));
  dingtalk_callback_sender::delivery forged;
  forged.wrong_secret = "not-the-secret";
  CHECK_FALSE(adapter.verify(as_received(sender.request(body, forged))));
  dingtalk_callback_sender::delivery old;
  old.timestamp_ms = unix_ms() - 2 * 3600 * 1000;
  CHECK_FALSE(adapter.verify(as_received(sender.request(body, old))));
  const auto decoded = adapter.decode(as_received(sender.request(body, {})));
  REQUIRE(decoded);
  REQUIRE(decoded->messages.size() == 1);
  CHECK(decoded->messages[0].message_id == "msg-1");
  CHECK(decoded->messages[0].thread == "cidFakeConversation");
  CHECK(decoded->messages[0].sender == "staff-fake");
  CHECK(decoded->messages[0].text == "hello robot");
  m.msgtype = "picture";
  CHECK(adapter.decode(as_received(sender.request(dingtalk_callback_sender::callback_body(m), {})))
            ->messages.empty());
  CHECK_FALSE(adapter.decode(as_received(sender.request("{\"text\":1}", {}))));
}

TEST_CASE("the dingtalk adapter replies through a valid session webhook",
          "[net][channels][dingtalk]") {
  fake_dingtalk fake;
  dingtalk_adapter adapter(options_for(fake));
  asio::io_context io;
  http_client http(io.get_executor());
  const auto session = fake.new_session();
  dingtalk_callback_sender::message m;
  m.msg_id = "msg-1";
  m.text = "hi";
  m.session_webhook = session.url;
  m.session_webhook_expires_ms = session.expires_ms;
  const auto r =
      run_until_done(io, adapter.send(http, part_of(reply_to_of(adapter, m), "hello"), 5s));
  CHECK(r.outcome == send_outcome::sent);
  const auto sends = fake.sends();
  REQUIRE(sends.size() == 1);
  CHECK(sends[0].via == "webhook");
  CHECK(sends[0].text == "hello");
  CHECK(fake.calls("token").empty());
}

TEST_CASE("the dingtalk adapter falls back to the send API when the session webhook expired",
          "[net][channels][dingtalk]") {
  fake_dingtalk fake;
  dingtalk_adapter adapter(options_for(fake));
  asio::io_context io;
  http_client http(io.get_executor());
  dingtalk_callback_sender::message m;
  m.msg_id = "msg-1";
  m.text = "hi";
  SECTION("expired by its expiry time: the webhook is not tried") {
    const auto session = fake.new_session(-1s);
    m.session_webhook = session.url;
    m.session_webhook_expires_ms = session.expires_ms;
    auto r = run_until_done(io, adapter.send(http, part_of(reply_to_of(adapter, m), "one"), 5s));
    CHECK(r.outcome == send_outcome::sent);
    CHECK(fake.calls("webhook").empty());
    REQUIRE(fake.sends().size() == 1);
    CHECK(fake.sends()[0].via == "batchSend");
    CHECK(fake.sends()[0].target == "staff-fake");
  }
  SECTION("refused by the platform early: the send API takes the part") {
    const auto session = fake.new_session(-1s);
    m.session_webhook = session.url;
    m.session_webhook_expires_ms = unix_ms() + 3'600'000; // the callback said it was valid
    m.conversation_type = "2";
    auto r = run_until_done(io, adapter.send(http, part_of(reply_to_of(adapter, m), "two"), 5s));
    CHECK(r.outcome == send_outcome::sent);
    CHECK(fake.calls("webhook").size() == 1);
    REQUIRE(fake.sends().size() == 1);
    CHECK(fake.sends()[0].via == "groupSend");
    CHECK(fake.sends()[0].target == "cidFakeConversation");
  }
  SECTION("a session webhook off dingtalk.com and off api_base is never posted to") {
    m.session_webhook = "https://evil.example.org/robot/sendBySession?session=x";
    m.session_webhook_expires_ms = unix_ms() + 3'600'000;
    auto r = run_until_done(io, adapter.send(http, part_of(reply_to_of(adapter, m), "x"), 5s));
    CHECK(r.outcome == send_outcome::sent);
    CHECK(fake.sends().at(0).via == "batchSend");
  }
}

TEST_CASE("the dingtalk adapter refreshes a refused token and retries throttling",
          "[net][channels][dingtalk]") {
  fake_dingtalk fake;
  dingtalk_adapter adapter(options_for(fake));
  asio::io_context io;
  http_client http(io.get_executor());
  dingtalk_callback_sender::message m;
  m.msg_id = "msg-1";
  m.text = "hi";
  const auto to = reply_to_of(adapter, m);
  CHECK(run_until_done(io, adapter.send(http, part_of(to, "a"), 5s)).outcome == send_outcome::sent);
  fake.expire_tokens();
  CHECK(run_until_done(io, adapter.send(http, part_of(to, "b"), 5s)).outcome == send_outcome::sent);
  CHECK(fake.calls("token").size() == 2);
  CHECK(fake.calls("batchSend").size() == 3);
  CHECK(fake.sends().size() == 2);
  fake.fail("batchSend", {dingtalk_fault::kind::rate_limited, 3});
  auto r = run_until_done(io, adapter.send(http, part_of(to, "c"), 5s));
  CHECK(r.outcome == send_outcome::retry);
  CHECK(r.retry_after == 3s);
  fake.fail("batchSend", {dingtalk_fault::kind::server_error});
  CHECK(run_until_done(io, adapter.send(http, part_of(to, "c"), 5s)).outcome ==
        send_outcome::retry);
  CHECK(run_until_done(io, adapter.send(http, part_of(to, "c"), 5s)).outcome == send_outcome::sent);
  CHECK(fake.sends().size() == 3);
  CHECK(adapter.split(std::string(12'000, 'b')).size() == 3);
}

TEST_CASE("dingtalk session webhooks are allowed on dingtalk.com over https or on api_base",
          "[net][channels][dingtalk]") {
  CHECK(dingtalk_webhook_allowed("https://oapi.dingtalk.com/robot/sendBySession?session=1",
                                 "https://api.dingtalk.com"));
  CHECK_FALSE(dingtalk_webhook_allowed("http://oapi.dingtalk.com/robot/sendBySession",
                                       "https://api.dingtalk.com"));
  CHECK_FALSE(dingtalk_webhook_allowed("https://oapi.dingtalk.com.evil.org/robot",
                                       "https://api.dingtalk.com"));
  CHECK_FALSE(
      dingtalk_webhook_allowed("https://user@oapi.dingtalk.com/robot", "https://api.dingtalk.com"));
  CHECK(dingtalk_webhook_allowed("http://127.0.0.1:4567/robot/sendBySession?session=1",
                                 "http://127.0.0.1:4567"));
  CHECK_FALSE(dingtalk_webhook_allowed("http://127.0.0.1:4568/robot/sendBySession",
                                       "http://127.0.0.1:4567"));
}
