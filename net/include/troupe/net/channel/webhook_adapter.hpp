#pragma once

/// \file
/// The generic JSON webhook channel. Inbound: `POST /api/v1/webhooks/channels/{name}`
/// with the body `{"thread": "...", "sender": "...", "message_id": "...", "text": "..."}`
/// and the channel's token in `X-Webhook-Token` (compared in constant time). Outbound:
/// `POST <callback_url>` with the body
/// `{"channel": "...", "thread": "...", "run_id": "...", "part": 0, "text": "..."}`,
/// signed as `X-Troupe-Signature: sha256=<hex HMAC-SHA256 of the body under the token>`,
/// with `X-Troupe-Idempotency-Key: <run_id>:<part>` so a receiver can drop a second copy.

#include <string>

#include "troupe/net/channel/adapter.hpp"

namespace troupe::net::channel {

/// The header an inbound request carries the token in.
inline constexpr std::string_view webhook_token_header = "X-Webhook-Token";
/// The header of the outbound signature.
inline constexpr std::string_view webhook_signature_header = "X-Troupe-Signature";
/// The header of the outbound idempotency key.
inline constexpr std::string_view webhook_idempotency_header = "X-Troupe-Idempotency-Key";

/// `sha256=<hex>` of `body` under `token`: what X-Troupe-Signature carries.
std::string webhook_signature(std::string_view token, std::string_view body);

class webhook_adapter final : public channel_adapter {
public:
  /// `channel` is the channel's name (in every outbound body); `token` its shared secret.
  webhook_adapter(std::string channel, std::string token, std::string callback_url);

  expected<void> verify(const http_request& request) const override;
  expected<decoded_request> decode(const http_request& request) const override;
  boost::asio::awaitable<send_result> send(http_client& http, outbound_part part,
                                           std::chrono::milliseconds deadline) override;

  /// The body `send` posts for `part` (exposed for tests and receivers' docs).
  std::string outbound_body(const outbound_part& part) const;

private:
  std::string channel_;
  std::string token_;
  std::string callback_url_;
};

} // namespace troupe::net::channel
