#include "troupe/net/channel/dingtalk_wire.hpp"

#include <charconv>

#include "platform_wire.hpp"
#include "troupe/net/provider_wire.hpp"
#include "troupe/runtime/base64.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::net::dingtalk {

namespace {

using namespace channel_json;

std::string trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return {};
  }
  return std::string(text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1));
}

/// A member that DingTalk sends as a number or as a string of digits.
std::int64_t number_member(dom::object obj, std::string_view key) {
  if (auto n = int_member(obj, key)) {
    return *n;
  }
  const auto text = text_member(obj, key);
  std::int64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  return ec == std::errc{} ? n : 0;
}

} // namespace

std::string sign(std::string_view app_secret, std::string_view timestamp) {
  const auto mac = hmac_sha256(app_secret, std::string(timestamp) + "\n" + std::string(app_secret));
  return base64_encode(std::string_view(reinterpret_cast<const char*>(mac.data()), mac.size()));
}

std::string_view to_string(signature_check c) noexcept {
  switch (c) {
    case signature_check::valid:
      return "valid";
    case signature_check::missing:
      return "missing";
    case signature_check::malformed_timestamp:
      return "malformed timestamp";
    case signature_check::stale:
      return "timestamp more than an hour from now";
    case signature_check::mismatch:
      return "mismatch";
  }
  return "mismatch";
}

signature_check verify_signature(std::string_view app_secret, std::string_view timestamp,
                                 std::string_view signature,
                                 std::chrono::system_clock::time_point now) {
  if (app_secret.empty() || timestamp.empty() || signature.empty()) {
    return signature_check::missing;
  }
  std::int64_t ms = 0;
  const auto [end, ec] = std::from_chars(timestamp.data(), timestamp.data() + timestamp.size(), ms);
  if (ec != std::errc{} || end != timestamp.data() + timestamp.size() || ms <= 0) {
    return signature_check::malformed_timestamp;
  }
  const auto at = std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
  const auto gap = at > now ? at - now : now - at;
  if (gap > signature_window) {
    return signature_check::stale;
  }
  return constant_time_equal(sign(app_secret, timestamp), signature) ? signature_check::valid
                                                                     : signature_check::mismatch;
}

expected<message> decode_message(std::string_view body) {
  auto doc = document::parse_object(body, "DingTalk callback");
  if (!doc) {
    return tl::unexpected(doc.error());
  }
  const auto root = doc->root();
  message out;
  out.msg_id = text_member(root, "msgId");
  if (out.msg_id.empty()) {
    return fail(errc::parse_error, "DingTalk callback: no msgId");
  }
  out.msgtype = text_member(root, "msgtype");
  if (const auto text = object_member(root, "text")) {
    out.text = trimmed(text_member(*text, "content"));
  }
  out.conversation_id = text_member(root, "conversationId");
  out.conversation_type = text_member(root, "conversationType");
  out.sender_staff_id = text_member(root, "senderStaffId");
  out.sender_id = text_member(root, "senderId");
  out.session_webhook = text_member(root, "sessionWebhook");
  out.session_webhook_expires_ms = number_member(root, "sessionWebhookExpiredTime");
  out.robot_code = text_member(root, "robotCode");
  return out;
}

std::string encode_reply_target(const reply_target& t) {
  json_writer w;
  w.begin_object()
      .key("webhook")
      .value(t.session_webhook)
      .key("expires")
      .value(t.session_webhook_expires_ms)
      .key("conversation")
      .value(t.conversation_id)
      .key("type")
      .value(t.conversation_type)
      .key("user")
      .value(t.user_id)
      .end_object();
  return std::move(w).str();
}

std::optional<reply_target> decode_reply_target(std::string_view text) {
  auto doc = document::parse_object(text, "DingTalk reply target");
  if (!doc) {
    return std::nullopt;
  }
  const auto root = doc->root();
  reply_target t;
  t.session_webhook = text_member(root, "webhook");
  t.session_webhook_expires_ms = int_member(root, "expires").value_or(0);
  t.conversation_id = text_member(root, "conversation");
  t.conversation_type = text_member(root, "type");
  t.user_id = text_member(root, "user");
  return t;
}

std::string encode_webhook_text(std::string_view text) {
  json_writer w;
  w.begin_object()
      .key("msgtype")
      .value("text")
      .key("text")
      .begin_object()
      .key("content")
      .value(text)
      .end_object()
      .end_object();
  return std::move(w).str();
}

namespace {

std::string sample_text_param(std::string_view text) {
  json_writer p;
  p.begin_object().key("content").value(text).end_object();
  return std::move(p).str();
}

} // namespace

std::string encode_batch_send(std::string_view robot_code, std::string_view user_id,
                              std::string_view text) {
  json_writer w;
  w.begin_object()
      .key("robotCode")
      .value(robot_code)
      .key("userIds")
      .begin_array()
      .value(user_id)
      .end_array()
      .key("msgKey")
      .value("sampleText")
      .key("msgParam")
      .value(sample_text_param(text))
      .end_object();
  return std::move(w).str();
}

std::string encode_group_send(std::string_view robot_code, std::string_view open_conversation_id,
                              std::string_view text) {
  json_writer w;
  w.begin_object()
      .key("robotCode")
      .value(robot_code)
      .key("openConversationId")
      .value(open_conversation_id)
      .key("msgKey")
      .value("sampleText")
      .key("msgParam")
      .value(sample_text_param(text))
      .end_object();
  return std::move(w).str();
}

std::string encode_token_request(std::string_view app_key, std::string_view app_secret) {
  json_writer w;
  w.begin_object().key("appKey").value(app_key).key("appSecret").value(app_secret).end_object();
  return std::move(w).str();
}

bool answer::token_rejected() const noexcept {
  // The v1.0 API answers 401 {"code":"InvalidAuthentication"} for an invalid or expired
  // token; the old API's errcode 40014 / 42001 say the same.
  return http_status == 401 || code == "InvalidAuthentication" || errcode == 40014 ||
         errcode == 42001;
}

bool answer::rate_limited() const noexcept {
  // HTTP 429, the v1.0 API's throttling codes ("Throttling", "Throttling.Api",
  // "Forbidden.AccessDenied.QpsLimitForApi", …) and the robot's "sending too fast"
  // (errcode 130101) / QPS (90018) answers.
  return http_status == 429 || code.starts_with("Throttling") ||
         code.find("LimitFor") != std::string::npos || errcode == 130101 || errcode == 90018;
}

answer classify_answer(unsigned http_status, std::string_view retry_after_header,
                       std::string_view body) {
  answer out;
  out.http_status = http_status;
  if (auto wait = parse_retry_after(retry_after_header)) {
    out.retry_after = std::chrono::duration_cast<std::chrono::seconds>(*wait);
  }
  auto doc = document::parse_object(body, "DingTalk answer");
  if (!doc) {
    out.message = excerpt(body);
    return out;
  }
  const auto root = doc->root();
  out.errcode = int_member(root, "errcode").value_or(-1);
  out.code = text_member(root, "code");
  out.message = text_member(root, "message");
  if (out.message.empty()) {
    out.message = text_member(root, "errmsg");
  }
  out.access_token = text_member(root, "accessToken");
  out.expire_in = int_member(root, "expireIn").value_or(0);
  out.process_query_key = text_member(root, "processQueryKey");
  return out;
}

} // namespace troupe::net::dingtalk
