#pragma once

/// \file
/// The Feishu/Lark event subscription (v2) and IM API wire format (issue 22;
/// reference/channels.md): the request signature, decrypting `{"encrypt": …}` bodies,
/// decoding url_verification and `im.message.receive_v1` events, the reply and token
/// calls' bodies, and classifying the API's answers. Pure functions; no I/O. Untrusted
/// input is parsed whole by simdjson's DOM parser: malformed bytes are an error value.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "troupe/runtime/error.hpp"

namespace troupe::net::feishu {

inline constexpr std::string_view timestamp_header = "X-Lark-Request-Timestamp";
inline constexpr std::string_view nonce_header = "X-Lark-Request-Nonce";
inline constexpr std::string_view signature_header = "X-Lark-Signature";

/// Feishu's text limit per part (a text message's content may be up to 150 KB; troupe
/// keeps parts readable, as for Telegram).
inline constexpr std::size_t message_limit = 4000;

/// The API's codes troupe acts on.
inline constexpr std::int64_t code_ok = 0;
/// The tenant access token is invalid / expired: fetch a new one.
inline constexpr std::int64_t code_token_invalid = 99991663;
inline constexpr std::int64_t code_token_expired = 99991661;
inline constexpr std::int64_t code_token_expired_2 = 99991668;
/// "request trigger frequency limit".
inline constexpr std::int64_t code_rate_limited = 99991400;

/// Lower-case hex SHA-256 of timestamp + nonce + encrypt key + body: X-Lark-Signature.
std::string sign(std::string_view timestamp, std::string_view nonce, std::string_view encrypt_key,
                 std::string_view body);

/// Whether `signature` is `sign(…)` of the request, compared in constant time.
bool verify_signature(std::string_view timestamp, std::string_view nonce,
                      std::string_view encrypt_key, std::string_view body,
                      std::string_view signature);

/// The plaintext of an `encrypt` value: base64, the first 16 bytes the IV, AES-256-CBC
/// under SHA-256(encrypt key), PKCS#7.
expected<std::string> decrypt(std::string_view encrypt_key, std::string_view encrypted);
/// The inverse, with the given 16-byte `iv` (the fake platform's and tests' side).
std::string encrypt(std::string_view encrypt_key, std::string_view iv, std::string_view plain);

/// The `encrypt` member of a body, when the body is `{"encrypt": …}`.
expected<std::optional<std::string>> encrypted_member(std::string_view body);

/// What a (decrypted) callback body says.
struct event {
  enum class kind { url_verification, message, other };
  kind type = kind::other;
  /// url_verification: the challenge to echo.
  std::string challenge;
  /// The verification token (`token` of a url_verification, `header.token` of an event).
  std::string token;
  std::string event_id;
  std::string event_type;
  /// im.message.receive_v1 with message_type "text": the message.
  std::string message_id;
  std::string chat_id;
  /// "p2p" or "group".
  std::string chat_type;
  std::string root_id;
  std::string thread_id;
  std::string message_type;
  /// The text of a text message, mentions (`@_user_N`) stripped.
  std::string text;
  /// The sender's open_id, and `sender_type` ("user", "app").
  std::string sender;
  std::string sender_type;
};

/// Decodes a plaintext callback body. A malformed body is a `parse_error`.
expected<event> decode_event(std::string_view body);

/// `text` without `@_user_N` mention keys, trimmed.
std::string strip_mentions(std::string_view text);

/// The body of a url_verification answer: `{"challenge": …}`.
std::string encode_challenge_answer(std::string_view challenge);

/// The body of POST /im/v1/messages/{id}/reply with a text message; `uuid` (at most 50
/// characters) makes Feishu drop a second copy of the same part within an hour.
std::string encode_reply(std::string_view text, std::string_view uuid);

/// The body of POST /auth/v3/tenant_access_token/internal.
std::string encode_token_request(std::string_view app_id, std::string_view app_secret);

/// An API answer: `{"code": …, "msg": …, …}` with its HTTP status.
struct answer {
  unsigned http_status = 0;
  std::int64_t code = -1;
  std::string msg;
  /// Reply: data.message_id.
  std::string message_id;
  /// Token: tenant_access_token and expire (seconds).
  std::string token;
  std::int64_t expire = 0;
  /// The least wait asked for (Retry-After or x-ogw-ratelimit-reset), if any.
  std::optional<std::chrono::seconds> retry_after;

  bool ok() const noexcept {
    return http_status >= 200 && http_status < 300 && code == code_ok;
  }
  bool token_rejected() const noexcept {
    return code == code_token_invalid || code == code_token_expired || code == code_token_expired_2;
  }
  bool rate_limited() const noexcept {
    return http_status == 429 || code == code_rate_limited;
  }
  /// 5xx, 408, or a rate limit: worth sending again.
  bool retryable() const noexcept {
    return rate_limited() || http_status >= 500 || http_status == 408;
  }
};

/// Reads an answer; a body that is not JSON keeps `code` -1.
answer classify_answer(unsigned http_status, std::string_view retry_after_header,
                       std::string_view ratelimit_reset_header, std::string_view body);

} // namespace troupe::net::feishu
