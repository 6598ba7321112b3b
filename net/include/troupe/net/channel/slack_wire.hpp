#pragma once

/// \file
/// The Slack Events API and Web API wire format (issue 17; reference/channels.md):
/// verifying a request's v0 signature, decoding `url_verification` and `event_callback`
/// envelopes into the messages a channel handles (bot messages and edits flagged as
/// ignored), telling a slash command (form-encoded) from an event and decoding it, the
/// thread and message keys, encoding chat.postMessage and chat.update, and classifying
/// Web API answers. Pure functions; no I/O. Untrusted input is parsed whole by
/// simdjson's DOM parser: malformed bytes are an error value, never undefined behaviour.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "troupe/runtime/error.hpp"

namespace troupe::net::slack {

/// The request headers of a signed Events API delivery.
inline constexpr std::string_view timestamp_header = "X-Slack-Request-Timestamp";
inline constexpr std::string_view signature_header = "X-Slack-Signature";
/// Set on Slack's redeliveries (1, 2, 3) with the reason in X-Slack-Retry-Reason.
inline constexpr std::string_view retry_num_header = "X-Slack-Retry-Num";
inline constexpr std::string_view retry_reason_header = "X-Slack-Retry-Reason";

/// A request whose timestamp is further than this from now is refused (replay window).
inline constexpr std::chrono::seconds signature_window{300};

/// The outcome of checking a request's signature.
enum class signature_check {
  valid,
  /// A header is missing or the secret is empty.
  missing,
  /// The timestamp header is not a Unix time in seconds.
  malformed_timestamp,
  /// The timestamp is more than `signature_window` from `now` (a replay, or a bad clock).
  stale,
  /// The signature is not the HMAC of this body under the signing secret.
  mismatch,
};

std::string_view to_string(signature_check c) noexcept;

/// `v0=` and the lower-case hex HMAC-SHA256 of `v0:{timestamp}:{body}` under
/// `signing_secret`: the value of X-Slack-Signature.
std::string sign(std::string_view signing_secret, std::string_view timestamp,
                 std::string_view body);

/// Checks a delivery: the timestamp within `signature_window` of `now`, then the
/// signature compared in constant time.
signature_check verify_signature(std::string_view signing_secret, std::string_view timestamp,
                                 std::string_view signature, std::string_view body,
                                 std::chrono::system_clock::time_point now);

/// A message event (`message` or `app_mention`) of an event_callback.
struct message_event {
  /// The envelope's `event_id`: unique per event, the same on Slack's redeliveries.
  std::string event_id;
  std::string team_id;
  std::string api_app_id;
  /// "message" or "app_mention".
  std::string type;
  std::string channel;
  /// "im", "channel", "group", "mpim" (message events only).
  std::string channel_type;
  std::string user;
  std::string text;
  std::string ts;
  /// The thread's parent ts when the message is in a thread; empty otherwise.
  std::string thread_ts;
  std::string bot_id;
  std::string subtype;
  /// The envelope's `event_time` (Unix seconds).
  std::int64_t event_time = 0;
  /// True when the channel must not answer it: a bot's message (`bot_id`, subtype
  /// bot_message, or the bot's own user), an edit or deletion (message_changed,
  /// message_deleted), or any other subtype but thread_broadcast and file_share.
  bool ignored = false;
  /// Why it is ignored ("bot_id", "own_message", "subtype message_changed", …).
  std::string ignore_reason;

  friend bool operator==(const message_event&, const message_event&) = default;
};

/// A decoded Events API request body.
struct envelope {
  enum class kind {
    /// `url_verification`: answer with `challenge`.
    url_verification,
    /// `event_callback` with a message or app_mention event in `message`.
    message,
    /// Another event_callback (reaction_added, …) or envelope type: acknowledge only.
    other,
  };
  kind type = kind::other;
  std::string challenge;
  /// The envelope's type word ("event_callback", "app_rate_limited", …).
  std::string type_name;
  /// The event's type word, for `other` event callbacks.
  std::string event_type;
  std::string event_id;
  std::optional<message_event> message;
};

/// Decodes an Events API body. `bot_user_id` (from auth.test), when given, flags the
/// bot's own messages as ignored. Fails (parse_error) on bytes that are not a JSON
/// object with a string `type`, or an event_callback without an event object.
expected<envelope> decode_envelope(std::string_view body, std::string_view bot_user_id = {});

/// A slash command typed in Slack's message box (`/new`), which Slack POSTs to the
/// command's Request URL form-encoded (application/x-www-form-urlencoded), signed as
/// events are; Slack waits 3 s for the answer and never sends it again.
struct slash_command {
  /// The command word with its slash ("/new").
  std::string command;
  /// What follows it ("2" of "/continue 2"); may be empty.
  std::string text;
  std::string team_id;
  std::string channel_id;
  std::string user_id;
  /// Where up to five answers may be POSTed within 30 minutes (troupe answers with
  /// chat.postMessage instead, as for any message).
  std::string response_url;
  /// Unique per invocation: the journal's key of the command.
  std::string trigger_id;

  friend bool operator==(const slash_command&, const slash_command&) = default;
};

/// True when a request body is form-encoded (a slash command) rather than an Events API
/// JSON object: its Content-Type says so, or, without one, it does not start with `{`.
bool is_slash_command(std::string_view content_type, std::string_view body) noexcept;

/// Decodes a slash command's form body (percent-decoding, `+` as space). Fails
/// (parse_error) without `command` (starting with `/`), `channel_id`, `user_id` or
/// `trigger_id`.
expected<slash_command> decode_slash_command(std::string_view body);

/// The JSON answer to a url_verification: `{"challenge":"…"}`.
std::string encode_challenge_answer(std::string_view challenge);

/// The thread key of a message: "<channel>:<thread_ts>", or "<channel>:<ts>" for a
/// message that starts a thread.
std::string thread_key(const message_event& e);
/// The `thread_ts` a reply to `e` is posted with: `thread_ts`, else `ts`.
std::string_view reply_thread_ts(const message_event& e) noexcept;
/// "<channel>:<ts>": one user message, whichever events carry it (a mention in a channel
/// the bot is in arrives as both `message` and `app_mention`, with two event ids).
std::string message_key(const message_event& e);

/// `text` without a leading mention of the bot (`<@U123> hi` → `hi`).
std::string_view strip_mention(std::string_view text, std::string_view bot_user_id) noexcept;

/// `{api_base}/{method}` (api_base as "https://slack.com/api"; no doubled slash).
std::string method_url(std::string_view api_base, std::string_view method);

/// A chat.postMessage body: `text` in `channel`, in thread `thread_ts` when not empty.
std::string encode_post_message(std::string_view channel, std::string_view text,
                                std::string_view thread_ts = {});
/// A chat.update body: message `ts` of `channel` gets `text`.
std::string encode_update_message(std::string_view channel, std::string_view ts,
                                  std::string_view text);

/// What a Web API answer means for the call that got it.
enum class answer_kind {
  /// `ok: true`.
  ok,
  /// HTTP 429 or `ratelimited`: retry after `retry_after`.
  rate_limited,
  /// 5xx, `internal_error`, `fatal_error`, `service_unavailable`, `request_timeout`:
  /// retry with back-off.
  server_error,
  /// `not_authed`, `invalid_auth`, `account_inactive`, `token_revoked`,
  /// `token_expired`, `no_permission`, `missing_scope`: the token is wrong. Not retried.
  unauthorized,
  /// Any other `ok: false` (`channel_not_found`, `not_in_channel`, `msg_too_long`,
  /// `no_text`, …). Not retried.
  permanent,
  /// Bytes that are not the Web API's shape. Retry with back-off.
  malformed,
};

std::string_view to_string(answer_kind k) noexcept;

/// A classified answer.
struct answer {
  answer_kind kind = answer_kind::malformed;
  unsigned http_status = 0;
  /// The `error` word, or why the body could not be read.
  std::string error;
  std::optional<std::chrono::seconds> retry_after;
  /// `ts` and `channel` of a posted or updated message.
  std::string ts;
  std::string channel;

  bool ok() const noexcept {
    return kind == answer_kind::ok;
  }
  bool retryable() const noexcept {
    return kind == answer_kind::rate_limited || kind == answer_kind::server_error ||
           kind == answer_kind::malformed;
  }
};

/// Classifies a Web API answer from its HTTP status, `Retry-After` header and body.
answer classify_answer(unsigned http_status, std::string_view retry_after, std::string_view body);

} // namespace troupe::net::slack
