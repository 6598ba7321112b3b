#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "troupe/net/channel/slack_wire.hpp"

using namespace troupe;
using namespace troupe::net::slack;
using namespace std::chrono;

namespace {

system_clock::time_point at(std::int64_t unix_seconds) {
  return system_clock::time_point(seconds(unix_seconds));
}

// Slack's documented example ("Verifying requests from Slack").
constexpr std::string_view doc_secret = "8f742231b10e8888abcd99yyyzzz85a5";
constexpr std::string_view doc_timestamp = "1531420618";
constexpr std::string_view doc_body =
    "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id="
    "G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-"
    "collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%"
    "2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121."
    "803a0bc887a14d10d2c447fce8b6703c";
constexpr std::string_view doc_signature =
    "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

} // namespace

TEST_CASE("the v0 signature matches Slack's documented example", "[net][slack]") {
  CHECK(sign(doc_secret, doc_timestamp, doc_body) == doc_signature);
  CHECK(verify_signature(doc_secret, doc_timestamp, doc_signature, doc_body, at(1531420618 + 60)) ==
        signature_check::valid);
}

TEST_CASE("a signature is refused outside the five-minute window", "[net][slack]") {
  CHECK(verify_signature(doc_secret, doc_timestamp, doc_signature, doc_body,
                         at(1531420618 + 300)) == signature_check::valid);
  CHECK(verify_signature(doc_secret, doc_timestamp, doc_signature, doc_body,
                         at(1531420618 + 301)) == signature_check::stale);
  CHECK(verify_signature(doc_secret, doc_timestamp, doc_signature, doc_body,
                         at(1531420618 - 301)) == signature_check::stale);
}

TEST_CASE("a wrong, truncated or missing signature is refused", "[net][slack]") {
  const auto now = at(1531420618);
  std::string body(doc_body);
  body.back() = 'd';
  CHECK(verify_signature(doc_secret, doc_timestamp, doc_signature, body, now) ==
        signature_check::mismatch);
  CHECK(verify_signature("other", doc_timestamp, doc_signature, doc_body, now) ==
        signature_check::mismatch);
  CHECK(verify_signature(doc_secret, doc_timestamp, doc_signature.substr(0, 40), doc_body, now) ==
        signature_check::mismatch);
  CHECK(verify_signature(doc_secret, doc_timestamp, "", doc_body, now) == signature_check::missing);
  CHECK(verify_signature("", doc_timestamp, doc_signature, doc_body, now) ==
        signature_check::missing);
  CHECK(verify_signature(doc_secret, "15314x0618", doc_signature, doc_body, now) ==
        signature_check::malformed_timestamp);
  CHECK(to_string(signature_check::stale) == "stale");
}

TEST_CASE("a url_verification envelope gives its challenge", "[net][slack]") {
  const auto e = decode_envelope(
      R"({"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"})");
  REQUIRE(e);
  CHECK(e->type == envelope::kind::url_verification);
  CHECK(e->challenge == "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P");
  CHECK(encode_challenge_answer(e->challenge) ==
        R"({"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"})");
}

namespace {

std::string callback(std::string_view event) {
  return std::string(R"({"token":"XXYYZZ","team_id":"T061EG9R6","api_app_id":"A0PNCHHK2",)") +
         R"("event":)" + std::string(event) +
         R"(,"type":"event_callback","event_id":"Ev0PV52K21","event_time":1764680000,)"
         R"("authorizations":[{"team_id":"T061EG9R6","user_id":"U0BOT","is_bot":true}]})";
}

} // namespace

TEST_CASE("a message event_callback decodes with its thread", "[net][slack]") {
  const auto e = decode_envelope(callback(
      R"({"type":"message","channel":"C2147483705","user":"U2147483697","text":"Hello world",)"
      R"("ts":"1355517523.000005","thread_ts":"1355517500.000001","channel_type":"channel"})"));
  REQUIRE(e);
  REQUIRE(e->type == envelope::kind::message);
  const auto& m = *e->message;
  CHECK(m.event_id == "Ev0PV52K21");
  CHECK(m.team_id == "T061EG9R6");
  CHECK(m.api_app_id == "A0PNCHHK2");
  CHECK(m.type == "message");
  CHECK(m.channel == "C2147483705");
  CHECK(m.channel_type == "channel");
  CHECK(m.user == "U2147483697");
  CHECK(m.text == "Hello world");
  CHECK(m.ts == "1355517523.000005");
  CHECK(m.event_time == 1764680000);
  CHECK_FALSE(m.ignored);
  CHECK(thread_key(m) == "C2147483705:1355517500.000001");
  CHECK(reply_thread_ts(m) == "1355517500.000001");
  CHECK(message_key(m) == "C2147483705:1355517523.000005");
}

TEST_CASE("a message that starts a thread is keyed and answered by its own ts", "[net][slack]") {
  const auto e = decode_envelope(
      callback(R"({"type":"app_mention","user":"U1","text":"<@U0BOT> what now?","ts":"17.000200",)"
               R"("channel":"C1","event_ts":"17.000200"})"));
  REQUIRE(e);
  const auto& m = *e->message;
  CHECK(m.type == "app_mention");
  CHECK(thread_key(m) == "C1:17.000200");
  CHECK(reply_thread_ts(m) == "17.000200");
  CHECK(strip_mention(m.text, "U0BOT") == "what now?");
  CHECK(strip_mention("<@U0BOT|troupe>  hi", "U0BOT") == "hi");
  CHECK(strip_mention("<@U0BOTX> hi", "U0BOT") == "<@U0BOTX> hi");
  CHECK(strip_mention("hi <@U0BOT>", "U0BOT") == "hi <@U0BOT>");
}

TEST_CASE("bot messages, own messages, edits and deletions are flagged as ignored",
          "[net][slack]") {
  const auto reason = [](std::string_view event, std::string_view bot = "U0BOT") {
    const auto e = decode_envelope(callback(event), bot);
    REQUIRE(e);
    REQUIRE(e->message);
    return e->message->ignored ? e->message->ignore_reason : std::string("answered");
  };
  CHECK(reason(R"({"type":"message","channel":"C1","bot_id":"B1","text":"x","ts":"1.2"})") ==
        "bot_id");
  CHECK(reason(R"({"type":"message","channel":"C1","user":"U0BOT","text":"x","ts":"1.2"})") ==
        "own_message");
  CHECK(reason(R"({"type":"message","subtype":"message_changed","channel":"C1","hidden":true,)"
               R"("message":{"type":"message","user":"U1","text":"new","ts":"1.2"},"ts":"1.3"})") ==
        "subtype message_changed");
  CHECK(reason(R"({"type":"message","subtype":"message_deleted","channel":"C1","ts":"1.3",)"
               R"("deleted_ts":"1.2"})") == "subtype message_deleted");
  CHECK(reason(
            R"({"type":"message","subtype":"bot_message","channel":"C1","text":"x","ts":"1.3"})") ==
        "subtype bot_message");
  CHECK(reason(R"({"type":"message","subtype":"thread_broadcast","channel":"C1","user":"U1",)"
               R"("text":"x","ts":"1.3","thread_ts":"1.1"})") == "answered");
}

TEST_CASE("other events are acknowledged without a message", "[net][slack]") {
  const auto e =
      decode_envelope(callback(R"({"type":"reaction_added","user":"U1","reaction":"x"})"));
  REQUIRE(e);
  CHECK(e->type == envelope::kind::other);
  CHECK(e->event_type == "reaction_added");
  CHECK(e->event_id == "Ev0PV52K21");
  const auto limited = decode_envelope(
      R"({"token":"x","team_id":"T1","minute_rate_limited":1518467820,"api_app_id":"A1","type":"app_rate_limited"})");
  REQUIRE(limited);
  CHECK(limited->type == envelope::kind::other);
  CHECK(limited->type_name == "app_rate_limited");
}

TEST_CASE("malformed Slack bodies are errors", "[net][slack]") {
  CHECK_FALSE(decode_envelope(""));
  CHECK_FALSE(decode_envelope(R"({"type":"event_callback","event":)"));
  CHECK_FALSE(decode_envelope(R"({"type":7})"));
  CHECK_FALSE(decode_envelope(R"({"type":"event_callback","event":"x"})"));
  CHECK_FALSE(decode_envelope(callback(R"({"type":"message","user":"U1","text":"x"})")));
  const auto e = decode_envelope("[]");
  REQUIRE_FALSE(e);
  CHECK(e.error().code == errc::parse_error);
}

TEST_CASE("chat.postMessage and chat.update bodies", "[net][slack]") {
  CHECK(encode_post_message("C1", "hi \"there\"", "17.000200") ==
        R"({"channel":"C1","text":"hi \"there\"","thread_ts":"17.000200"})");
  CHECK(encode_post_message("D1", "hi") == R"({"channel":"D1","text":"hi"})");
  CHECK(encode_update_message("C1", "18.1", "more") ==
        R"({"channel":"C1","ts":"18.1","text":"more"})");
  CHECK(method_url("https://slack.com/api/", "chat.postMessage") ==
        "https://slack.com/api/chat.postMessage");
}

TEST_CASE("Web API answers are classified", "[net][slack]") {
  const auto ok = classify_answer(
      200, "", R"({"ok":true,"channel":"C1","ts":"1503435956.000247","message":{"text":"x"}})");
  CHECK(ok.ok());
  CHECK(ok.ts == "1503435956.000247");
  CHECK(ok.channel == "C1");

  const auto limited = classify_answer(429, "30", R"({"ok":false,"error":"ratelimited"})");
  CHECK(limited.kind == answer_kind::rate_limited);
  CHECK(limited.retry_after == seconds(30));
  CHECK(limited.retryable());
  CHECK(classify_answer(429, "", "").retry_after == seconds(1));

  const auto missing = classify_answer(200, "", R"({"ok":false,"error":"channel_not_found"})");
  CHECK(missing.kind == answer_kind::permanent);
  CHECK(missing.error == "channel_not_found");
  CHECK(classify_answer(200, "", R"({"ok":false,"error":"invalid_auth"})").kind ==
        answer_kind::unauthorized);
  CHECK(classify_answer(200, "", R"({"ok":false,"error":"internal_error"})").kind ==
        answer_kind::server_error);
  CHECK(classify_answer(503, "", "Service Unavailable").kind == answer_kind::server_error);
  CHECK(classify_answer(200, "", "{\"ok\":").kind == answer_kind::malformed);
  CHECK(to_string(answer_kind::unauthorized) == "unauthorized");
}
