#pragma once

/// \file
/// The DingTalk robot wire format, HTTP callback mode (issue 22): the callback's
/// `timestamp` + `sign` headers, decoding a robot message, the session webhook's and the
/// robot send API's bodies, the access-token call, and classifying answers. Pure
/// functions; no I/O. Untrusted input is parsed whole by simdjson's DOM parser.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "troupe/runtime/error.hpp"

namespace troupe::net::dingtalk {

inline constexpr std::string_view timestamp_header = "timestamp";
inline constexpr std::string_view sign_header = "sign";
/// The header carrying the access token on the v1.0 API.
inline constexpr std::string_view token_header = "x-acs-dingtalk-access-token";

/// A callback whose timestamp is further than this from now is refused.
inline constexpr std::chrono::hours signature_window{1};

/// DingTalk's text limit per part troupe uses (a robot text message takes about 5,000
/// characters; longer answers are split).
inline constexpr std::size_t message_limit = 5000;

/// base64(HMAC-SHA256(app_secret, timestamp + "\n" + app_secret)): the `sign` header.
std::string sign(std::string_view app_secret, std::string_view timestamp);

enum class signature_check { valid, missing, malformed_timestamp, stale, mismatch };
std::string_view to_string(signature_check c) noexcept;

/// Checks a callback: the timestamp (milliseconds) within `signature_window` of `now`,
/// then `sign` compared in constant time.
signature_check verify_signature(std::string_view app_secret, std::string_view timestamp,
                                 std::string_view signature,
                                 std::chrono::system_clock::time_point now);

/// A robot message.
struct message {
  std::string msg_id;
  std::string msgtype;
  /// text.content, trimmed.
  std::string text;
  std::string conversation_id;
  /// "1": a single chat, "2": a group.
  std::string conversation_type;
  std::string sender_staff_id;
  std::string sender_id;
  std::string session_webhook;
  /// sessionWebhookExpiredTime (Unix milliseconds); 0 when absent.
  std::int64_t session_webhook_expires_ms = 0;
  std::string robot_code;
};

/// Decodes a callback body; a malformed one (or one without msgId) is a `parse_error`.
expected<message> decode_message(std::string_view body);

/// Where a reply goes (what `reply_to` holds, as JSON): the session webhook while it is
/// valid, else the send API to the user (single chat) or the conversation (group).
struct reply_target {
  std::string session_webhook;
  std::int64_t session_webhook_expires_ms = 0;
  std::string conversation_id;
  std::string conversation_type;
  std::string user_id;
};
std::string encode_reply_target(const reply_target& t);
std::optional<reply_target> decode_reply_target(std::string_view text);

/// `{"msgtype":"text","text":{"content":…}}`: a session webhook's body.
std::string encode_webhook_text(std::string_view text);
/// POST /v1.0/robot/oToMessages/batchSend: `text` to one user of a single chat.
std::string encode_batch_send(std::string_view robot_code, std::string_view user_id,
                              std::string_view text);
/// POST /v1.0/robot/groupMessages/send: `text` to a group conversation.
std::string encode_group_send(std::string_view robot_code, std::string_view open_conversation_id,
                              std::string_view text);
/// POST /v1.0/oauth2/accessToken.
std::string encode_token_request(std::string_view app_key, std::string_view app_secret);

/// An answer of the session webhook (`errcode`) or of the v1.0 API (`code` on errors).
struct answer {
  unsigned http_status = 0;
  /// The session webhook's errcode (0: sent); -1 when absent.
  std::int64_t errcode = -1;
  /// The v1.0 API's error code ("InvalidAuthentication", "Throttling.Api", …).
  std::string code;
  std::string message;
  std::string access_token;
  std::int64_t expire_in = 0;
  std::string process_query_key;
  std::optional<std::chrono::seconds> retry_after;

  bool http_ok() const noexcept {
    return http_status >= 200 && http_status < 300;
  }
  /// The token is invalid or expired.
  bool token_rejected() const noexcept;
  bool rate_limited() const noexcept;
  bool retryable() const noexcept {
    return rate_limited() || http_status >= 500 || http_status == 408;
  }
};
answer classify_answer(unsigned http_status, std::string_view retry_after_header,
                       std::string_view body);

} // namespace troupe::net::dingtalk
