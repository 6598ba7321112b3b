#include "troupe/net/channel/slack_wire.hpp"

#include <algorithm>
#include <array>
#include <charconv>

#include <fmt/format.h>

#include "channel/platform_wire.hpp"
#include "troupe/net/http_message.hpp"
#include "troupe/net/provider_wire.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::net::slack {

namespace {

using namespace channel_json;

/// Subtypes of messages a person wrote: answered like plain messages.
constexpr std::array answered_subtypes{std::string_view{"thread_broadcast"},
                                       std::string_view{"file_share"}};

/// Error words that mean the token cannot work.
constexpr std::array auth_errors{
    std::string_view{"not_authed"},       std::string_view{"invalid_auth"},
    std::string_view{"account_inactive"}, std::string_view{"token_revoked"},
    std::string_view{"token_expired"},    std::string_view{"no_permission"},
    std::string_view{"missing_scope"},    std::string_view{"not_allowed_token_type"}};

/// Error words of Slack's own failures.
constexpr std::array server_errors{
    std::string_view{"internal_error"}, std::string_view{"fatal_error"},
    std::string_view{"service_unavailable"}, std::string_view{"request_timeout"}};

template <std::size_t N>
bool one_of(std::string_view word, const std::array<std::string_view, N>& words) {
  return std::find(words.begin(), words.end(), word) != words.end();
}

/// Why a message event is not to be answered, or "" when it is.
std::string ignore_reason(const message_event& e, std::string_view bot_user_id) {
  if (!e.bot_id.empty()) {
    return "bot_id";
  }
  if (!bot_user_id.empty() && e.user == bot_user_id) {
    return "own_message";
  }
  if (!e.subtype.empty() && !one_of(e.subtype, answered_subtypes)) {
    return "subtype " + e.subtype;
  }
  if (e.user.empty()) {
    return "no_user";
  }
  return {};
}

} // namespace

std::string_view to_string(signature_check c) noexcept {
  switch (c) {
    case signature_check::valid:
      return "valid";
    case signature_check::missing:
      return "missing";
    case signature_check::malformed_timestamp:
      return "malformed_timestamp";
    case signature_check::stale:
      return "stale";
    case signature_check::mismatch:
      return "mismatch";
  }
  return "mismatch";
}

std::string sign(std::string_view signing_secret, std::string_view timestamp,
                 std::string_view body) {
  std::string base;
  base.reserve(body.size() + timestamp.size() + 4);
  base += "v0:";
  base += timestamp;
  base += ':';
  base += body;
  return "v0=" + to_hex(hmac_sha256(signing_secret, base));
}

signature_check verify_signature(std::string_view signing_secret, std::string_view timestamp,
                                 std::string_view signature, std::string_view body,
                                 std::chrono::system_clock::time_point now) {
  if (signing_secret.empty() || timestamp.empty() || signature.empty()) {
    return signature_check::missing;
  }
  std::int64_t seconds = 0;
  const auto [end, ec] =
      std::from_chars(timestamp.data(), timestamp.data() + timestamp.size(), seconds);
  if (ec != std::errc{} || end != timestamp.data() + timestamp.size() || seconds <= 0) {
    return signature_check::malformed_timestamp;
  }
  const auto now_seconds =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  const auto skew = now_seconds > seconds ? now_seconds - seconds : seconds - now_seconds;
  if (skew > signature_window.count()) {
    return signature_check::stale;
  }
  return constant_time_equal(sign(signing_secret, timestamp, body), signature)
             ? signature_check::valid
             : signature_check::mismatch;
}

expected<envelope> decode_envelope(std::string_view body, std::string_view bot_user_id) {
  auto doc = document::parse_object(body, "Slack event");
  if (!doc) {
    return tl::unexpected(doc.error());
  }
  const auto root = doc->root();
  const auto type = string_member(root, "type");
  if (!type) {
    return fail(errc::parse_error, "Slack event: has no string type: " + excerpt(body));
  }
  envelope out;
  out.type_name = std::string(*type);
  out.event_id = text_member(root, "event_id");
  if (*type == "url_verification") {
    out.type = envelope::kind::url_verification;
    out.challenge = text_member(root, "challenge");
    return out;
  }
  if (*type != "event_callback") {
    return out;
  }
  const auto event = object_member(root, "event");
  if (!event) {
    return fail(errc::parse_error, "Slack event: an event_callback has no event object");
  }
  out.event_type = text_member(*event, "type");
  if (out.event_type != "message" && out.event_type != "app_mention") {
    return out;
  }
  message_event m;
  m.event_id = out.event_id;
  m.team_id = text_member(root, "team_id");
  m.api_app_id = text_member(root, "api_app_id");
  m.event_time = int_member(root, "event_time").value_or(0);
  m.type = out.event_type;
  m.channel = text_member(*event, "channel");
  m.channel_type = text_member(*event, "channel_type");
  m.user = text_member(*event, "user");
  m.text = text_member(*event, "text");
  m.ts = text_member(*event, "ts");
  m.thread_ts = text_member(*event, "thread_ts");
  m.bot_id = text_member(*event, "bot_id");
  m.subtype = text_member(*event, "subtype");
  m.ignore_reason = ignore_reason(m, bot_user_id);
  m.ignored = !m.ignore_reason.empty();
  if (!m.ignored && (m.channel.empty() || m.ts.empty())) {
    return fail(errc::parse_error, "Slack event: a message event has no channel or ts");
  }
  out.type = envelope::kind::message;
  out.message = std::move(m);
  return out;
}

std::string encode_challenge_answer(std::string_view challenge) {
  json_writer w;
  w.begin_object().key("challenge").value(challenge).end_object();
  return std::move(w).str();
}

std::string thread_key(const message_event& e) {
  return e.channel + ':' + std::string(reply_thread_ts(e));
}

std::string_view reply_thread_ts(const message_event& e) noexcept {
  return e.thread_ts.empty() ? std::string_view(e.ts) : std::string_view(e.thread_ts);
}

std::string message_key(const message_event& e) {
  return e.channel + ':' + e.ts;
}

bool is_slash_command(std::string_view content_type, std::string_view body) noexcept {
  const auto semicolon = content_type.find(';');
  auto media = content_type.substr(0, semicolon);
  while (!media.empty() && media.back() == ' ') {
    media.remove_suffix(1);
  }
  if (!media.empty()) {
    return iequals(media, "application/x-www-form-urlencoded");
  }
  const auto first = body.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && body[first] != '{';
}

expected<slash_command> decode_slash_command(std::string_view body) {
  slash_command out;
  std::string* fields[] = {&out.command, &out.text,         &out.team_id,   &out.channel_id,
                           &out.user_id, &out.response_url, &out.trigger_id};
  constexpr std::string_view names[] = {"command", "text",         "team_id",   "channel_id",
                                        "user_id", "response_url", "trigger_id"};
  while (!body.empty()) {
    const auto amp = body.find('&');
    const auto pair = body.substr(0, amp);
    body = amp == std::string_view::npos ? std::string_view{} : body.substr(amp + 1);
    const auto eq = pair.find('=');
    const auto key = percent_decode(pair.substr(0, eq), true);
    for (std::size_t k = 0; k < std::size(names); ++k) {
      if (key == names[k]) {
        *fields[k] = eq == std::string_view::npos ? std::string{}
                                                  : percent_decode(pair.substr(eq + 1), true);
      }
    }
  }
  if (out.command.size() < 2 || out.command.front() != '/') {
    return fail(errc::parse_error, "slash command: no command (a word starting with /)");
  }
  for (std::size_t k : {3u, 4u, 6u}) {
    if (fields[k]->empty()) {
      return fail(errc::parse_error, fmt::format("slash command: no {}", names[k]));
    }
  }
  return out;
}

std::string_view strip_mention(std::string_view text, std::string_view bot_user_id) noexcept {
  if (bot_user_id.empty()) {
    return text;
  }
  const auto start = text.find_first_not_of(" \t\n");
  if (start == std::string_view::npos) {
    return text;
  }
  auto rest = text.substr(start);
  if (!rest.starts_with("<@") || rest.substr(2, bot_user_id.size()) != bot_user_id) {
    return text;
  }
  rest.remove_prefix(2 + bot_user_id.size());
  // `<@U123>` or `<@U123|name>`.
  const auto close = rest.find('>');
  if (close == std::string_view::npos || (close > 0 && rest.front() != '|')) {
    return text;
  }
  rest.remove_prefix(close + 1);
  const auto first = rest.find_first_not_of(" \t\n");
  return first == std::string_view::npos ? std::string_view{} : rest.substr(first);
}

std::string method_url(std::string_view api_base, std::string_view method) {
  return join_url(api_base, method);
}

std::string encode_post_message(std::string_view channel, std::string_view text,
                                std::string_view thread_ts) {
  json_writer w;
  w.begin_object().key("channel").value(channel).key("text").value(text);
  if (!thread_ts.empty()) {
    w.key("thread_ts").value(thread_ts);
  }
  return std::move(w.end_object()).str();
}

std::string encode_update_message(std::string_view channel, std::string_view ts,
                                  std::string_view text) {
  json_writer w;
  w.begin_object().key("channel").value(channel).key("ts").value(ts).key("text").value(text);
  return std::move(w.end_object()).str();
}

std::string_view to_string(answer_kind k) noexcept {
  switch (k) {
    case answer_kind::ok:
      return "ok";
    case answer_kind::rate_limited:
      return "rate_limited";
    case answer_kind::server_error:
      return "server_error";
    case answer_kind::unauthorized:
      return "unauthorized";
    case answer_kind::permanent:
      return "permanent";
    case answer_kind::malformed:
      return "malformed";
  }
  return "malformed";
}

answer classify_answer(unsigned http_status, std::string_view retry_after, std::string_view body) {
  answer out;
  out.http_status = http_status;
  if (const auto wait = parse_retry_after(retry_after)) {
    out.retry_after = std::chrono::ceil<std::chrono::seconds>(*wait);
  }
  auto doc = document::parse_object(body, "Web API answer");
  const auto ok = doc ? bool_member(doc->root(), "ok") : std::nullopt;
  if (ok) {
    out.error = text_member(doc->root(), "error");
  }
  if (http_status == 429 || out.error == "ratelimited" || out.error == "rate_limited") {
    out.kind = answer_kind::rate_limited;
    if (!out.retry_after) {
      out.retry_after = std::chrono::seconds(1);
    }
    if (out.error.empty()) {
      out.error = "ratelimited";
    }
    return out;
  }
  if (!ok) {
    out.kind = http_status >= 500 ? answer_kind::server_error : answer_kind::malformed;
    out.error = doc ? "Web API answer: has no boolean ok: " + excerpt(body)
                    : doc.error().message + ": " + excerpt(body);
    return out;
  }
  if (*ok && http_status < 300) {
    out.kind = answer_kind::ok;
    out.ts = text_member(doc->root(), "ts");
    out.channel = text_member(doc->root(), "channel");
    return out;
  }
  if (http_status >= 500 || one_of(out.error, server_errors)) {
    out.kind = answer_kind::server_error;
  } else if (one_of(out.error, auth_errors) || http_status == 401 || http_status == 403) {
    out.kind = answer_kind::unauthorized;
  } else {
    out.kind = answer_kind::permanent;
  }
  if (out.error.empty()) {
    out.error = "http_" + std::to_string(http_status);
  }
  return out;
}

} // namespace troupe::net::slack
