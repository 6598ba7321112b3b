#include <chrono>
#include <string>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "support/fake_whatsapp.hpp"
#include "support/run_until_done.hpp"
#include "troupe/net/channel/whatsapp_adapter.hpp"

// g++ 12 at -O2 reports -Wmismatched-new-delete for Asio coroutine frames it inlines: a
// known false positive (awaitable_frame_base pairs its own operator new and delete).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

using namespace troupe;
using namespace troupe::net;
using namespace troupe::net::channel;
using namespace std::chrono_literals;
using troupe::test::fake_whatsapp;
using troupe::test::run_until_done;
using troupe::test::whatsapp_fault;
using troupe::test::whatsapp_sender;

namespace {

constexpr auto phone = "106540352242922";

whatsapp_options options_for(std::string api_base, std::string token = "EAAG-token") {
  whatsapp_options o;
  o.channel = "wa";
  o.phone_number_id = phone;
  o.app_secret = "app-secret";
  o.verify_token = "verify-me";
  o.api_base = std::move(api_base);
  o.token_source = [token] { return token; };
  return o;
}

http_request get_request(std::string query) {
  http_request r;
  r.method = http_method::get;
  r.query = std::move(query);
  return r;
}

outbound_part part_to(std::string reply_to, std::string text) {
  outbound_part p;
  p.reply_to = std::move(reply_to);
  p.text = std::move(text);
  p.run_id = "run-1";
  return p;
}

std::int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace

// python3 -c "import hmac, hashlib; print(hmac.new(b'app-secret',
//   b'{\"object\":\"whatsapp_business_account\"}', hashlib.sha256).hexdigest())"
TEST_CASE("whatsapp: X-Hub-Signature-256 is the hex HMAC-SHA256 of the raw body",
          "[net][whatsapp]") {
  const std::string body = R"({"object":"whatsapp_business_account"})";
  const std::string hex = "0bf7374433906636bed1653bc7c64affb42fa5da9a39e251ab95c2e3a9c06923";
  CHECK(whatsapp::signature_valid("app-secret", "sha256=" + hex, body));
  CHECK_FALSE(whatsapp::signature_valid("app-secret", hex, body));
  CHECK_FALSE(whatsapp::signature_valid("other-secret", "sha256=" + hex, body));
  CHECK_FALSE(whatsapp::signature_valid("app-secret", "sha256=" + hex, body + " "));
  CHECK_FALSE(whatsapp::signature_valid("", "sha256=" + hex, body));
}

TEST_CASE("whatsapp: the subscription check echoes hub.challenge only for the verify token",
          "[net][whatsapp]") {
  whatsapp_adapter adapter(options_for("http://127.0.0.1:1/v21.0"));
  auto ok = adapter.answer_get(
      get_request("hub.mode=subscribe&hub.verify_token=verify-me&hub.challenge=1158201444"));
  REQUIRE(ok);
  CHECK(ok->status == 200);
  CHECK(ok->body == "1158201444");
  for (const auto* bad :
       {"hub.mode=subscribe&hub.verify_token=nope&hub.challenge=1",
        "hub.mode=unsubscribe&hub.verify_token=verify-me&hub.challenge=1", "hub.challenge=1"}) {
    auto refused = adapter.answer_get(get_request(bad));
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == errc::permission_denied);
  }
}

TEST_CASE("whatsapp: text messages for this number decode but not statuses, other types or other "
          "numbers",
          "[net][whatsapp]") {
  whatsapp_adapter adapter(options_for("http://127.0.0.1:1/v21.0"));
  http_request r;
  r.method = http_method::post;
  r.body = whatsapp_sender::message_body({"wamid.A1", "16315551234", "hello", 1700000000}, phone);
  auto decoded = adapter.decode(r);
  REQUIRE(decoded);
  REQUIRE(decoded->messages.size() == 1);
  CHECK(decoded->messages[0].message_id == "wamid.A1");
  CHECK(decoded->messages[0].sender == "16315551234");
  CHECK(decoded->messages[0].text == "hello");
  CHECK(decoded->messages[0].reply_to == "16315551234@1700000000");
  r.body = whatsapp_sender::status_body("wamid.A1", phone);
  CHECK(adapter.decode(r)->messages.empty());
  r.body = whatsapp_sender::message_body({"wamid.A2", "1", "x", 1}, "999");
  CHECK(adapter.decode(r)->messages.empty());
  r.body = R"({"object":"page","entry":[]})";
  CHECK_FALSE(adapter.decode(r));
  r.body = "{not json";
  CHECK_FALSE(adapter.decode(r));
}

TEST_CASE("whatsapp: a reply outside the 24-hour window fails for good without a call",
          "[net][whatsapp]") {
  fake_whatsapp fake(phone, "EAAG-token");
  boost::asio::io_context io;
  http_client http(io.get_executor());
  whatsapp_adapter adapter(options_for(fake.api_base()));
  const auto now = now_seconds();
  auto late = run_until_done(
      io, adapter.send(
              http, part_to(whatsapp::encode_reply_to("16315551234", now - 25 * 3600), "x"), 5s));
  CHECK(late.outcome == send_outcome::failed);
  CHECK(late.error == "outside WhatsApp's 24-hour window");
  CHECK(fake.calls().empty());
  // A newer message of the same sender, seen by decode, opens the window again.
  http_request r;
  r.body = whatsapp_sender::message_body({"wamid.B", "16315551234", "again", now - 60}, phone);
  REQUIRE(adapter.decode(r));
  auto in_time = run_until_done(
      io, adapter.send(
              http, part_to(whatsapp::encode_reply_to("16315551234", now - 25 * 3600), "x"), 5s));
  CHECK(in_time.outcome == send_outcome::sent);
  CHECK(in_time.platform_message_id.starts_with("wamid."));
}

TEST_CASE("whatsapp: send errors are classified (token, rate limits, 5xx, window, bad request)",
          "[net][whatsapp]") {
  fake_whatsapp fake(phone, "EAAG-token");
  boost::asio::io_context io;
  http_client http(io.get_executor());
  whatsapp_adapter adapter(options_for(fake.api_base()));
  const auto to = whatsapp::encode_reply_to("16315551234", now_seconds());
  // An expired token: read again and sent at once (the source gives the same, valid one).
  fake.fail({whatsapp_fault::kind::expire_token});
  auto refreshed = run_until_done(io, adapter.send(http, part_to(to, "a"), 5s));
  CHECK(refreshed.outcome == send_outcome::sent);
  CHECK(fake.calls().size() == 2);
  fake.fail({whatsapp_fault::kind::rate_limited});
  CHECK(run_until_done(io, adapter.send(http, part_to(to, "b"), 5s)).outcome ==
        send_outcome::retry);
  fake.fail({whatsapp_fault::kind::pair_rate_limited});
  CHECK(run_until_done(io, adapter.send(http, part_to(to, "c"), 5s)).outcome ==
        send_outcome::retry);
  fake.fail({whatsapp_fault::kind::server_error});
  CHECK(run_until_done(io, adapter.send(http, part_to(to, "d"), 5s)).outcome ==
        send_outcome::retry);
  fake.fail({whatsapp_fault::kind::window_closed});
  auto closed = run_until_done(io, adapter.send(http, part_to(to, "e"), 5s));
  CHECK(closed.outcome == send_outcome::failed);
  CHECK_THAT(closed.error, Catch::StartsWith("outside WhatsApp's 24-hour window"));
  auto too_long = run_until_done(io, adapter.send(http, part_to(to, std::string(4097, 'x')), 5s));
  CHECK(too_long.outcome == send_outcome::failed);
  CHECK(fake.sent().size() == 1);
  // A token that stays refused is retried by the outbox, not dead-lettered.
  whatsapp_adapter stale(options_for(fake.api_base(), "revoked"));
  auto refused = run_until_done(io, stale.send(http, part_to(to, "f"), 5s));
  CHECK(refused.outcome == send_outcome::retry);
  CHECK_THAT(refused.error, Catch::Contains("190"));
  // Parts of at most 4,096 characters.
  for (const auto& p : adapter.split(std::string(5000, 'y'))) {
    CHECK(p.size() <= whatsapp::text_limit);
  }
}
