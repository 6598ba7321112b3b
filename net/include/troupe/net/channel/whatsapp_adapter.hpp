#pragma once

/// \file
/// The WhatsApp channel (WhatsApp Business Cloud API, Graph API webhooks in, the
/// `/{phone_number_id}/messages` endpoint out).
///
/// GET: the subscription check (`hub.mode=subscribe`, `hub.verify_token` compared in
/// constant time with the verify token) is answered with `hub.challenge`, anything else
/// 403. POST: the `X-Hub-Signature-256` header (`sha256=` and the hex HMAC-SHA256 of the
/// raw body under the app secret) is checked in constant time; the text messages under
/// `entry[].changes[].value.messages[]` for this phone number id become messages, keyed by
/// their `id` (wamid); `statuses` updates and other types are ignored. Replies: one
/// `POST {api_base}/{phone_number_id}/messages` per part (at most 4,096 characters) with
/// the access token as a Bearer token.
///
/// The 24-hour customer-service window: a message's `reply_to` carries the sender and
/// the time of their message (`<wa_id>@<unix seconds>`), stored with every outbox row, so
/// the window is known after a restart too; the adapter also remembers each sender's
/// newest message. A reply more than 24 hours after the sender's last message fails for
/// good (a dead letter) with the reason "outside WhatsApp's 24-hour window", as does
/// Graph error 131047. 429 and errors 130429, 131056, 131048, 80007 and 4 (rate limits)
/// and 5xx are retried. A 401 or OAuth error 190 (an expired or revoked token) makes the
/// adapter read its token again (`token_source`: the variable, for a rotated token) and
/// retry at once; a token still refused is retried by the outbox.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "troupe/net/channel/adapter.hpp"

namespace troupe::net::channel {

namespace whatsapp {

inline constexpr std::string_view signature_header = "X-Hub-Signature-256";
/// The window after a person's message in which a business may answer freely.
inline constexpr std::chrono::hours service_window{24};
/// A text message's body: at most 4,096 characters.
inline constexpr std::size_t text_limit = 4096;
inline constexpr std::string_view window_closed = "outside WhatsApp's 24-hour window";

/// Whether `header` is `sha256=<hex HMAC-SHA256 of body under app_secret>`, compared in
/// constant time (an empty secret never matches).
bool signature_valid(std::string_view app_secret, std::string_view header, std::string_view body);

/// One text message of a webhook.
struct text_message {
  std::string id;
  std::string from;
  std::int64_t timestamp = 0;
  std::string body;
};

/// The text messages of a webhook body addressed to `phone_number_id` (statuses and other
/// types skipped); an invalid_argument for a body that is not a WhatsApp webhook.
expected<std::vector<text_message>> decode_webhook(std::string_view body,
                                                   std::string_view phone_number_id);

/// The body of a text message send to `to`.
std::string encode_send(std::string_view to, std::string_view text);

/// What a send's answer means.
struct send_answer {
  /// 2xx: the message id (messages[0].id).
  bool ok = false;
  std::string message_id;
  /// The Graph error code and message, when there is one.
  std::int64_t code = 0;
  std::string message;
};
send_answer read_send_answer(std::string_view body, unsigned status);

/// `<wa_id>@<unix seconds>`, and back.
std::string encode_reply_to(std::string_view wa_id, std::int64_t unix_seconds);
struct reply_target {
  std::string wa_id;
  std::int64_t unix_seconds = 0;
};
std::optional<reply_target> parse_reply_to(std::string_view reply_to);

} // namespace whatsapp

struct whatsapp_options {
  std::string channel;
  std::string phone_number_id;
  std::string app_secret;
  std::string verify_token;
  /// "https://graph.facebook.com/v21.0" or a fake's base.
  std::string api_base;
  /// The access token, read again after the platform refused it (a rotated token).
  std::function<std::string()> token_source;
  /// Now, for the 24-hour window (tests move it).
  std::function<std::chrono::system_clock::time_point()> clock = [] {
    return std::chrono::system_clock::now();
  };
};

class whatsapp_adapter final : public channel_adapter {
public:
  explicit whatsapp_adapter(whatsapp_options options);

  expected<void> verify(const http_request& request) const override;
  expected<handshake_answer> answer_get(const http_request& request) const override;
  expected<decoded_request> decode(const http_request& request) const override;
  boost::asio::awaitable<send_result> send(http_client& http, outbound_part part,
                                           std::chrono::milliseconds deadline) override;
  std::vector<std::string> split(std::string_view text) const override;

private:
  std::string token() const;
  std::string refresh_token(const std::string& refused);

  whatsapp_options options_;
  mutable std::mutex mutex_;
  std::string token_;
  /// Each sender's newest message (unix seconds), from decode.
  mutable std::map<std::string, std::int64_t, std::less<>> last_inbound_;
};

} // namespace troupe::net::channel
