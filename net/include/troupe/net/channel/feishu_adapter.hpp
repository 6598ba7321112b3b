#pragma once

/// \file
/// The Feishu/Lark channel (event subscription v2 in, IM API out; the wire format is
/// feishu_wire.hpp). An inbound request is verified before anything of it is kept: with
/// an encrypt key, its `X-Lark-Signature` (SHA-256 hex of timestamp + nonce + encrypt key
/// + raw body, compared in constant time) when Feishu sends one (it does on every event
/// of an app with an encrypt key; a url_verification may come without), and always the
/// verification token of the (decrypted) body, in constant time. A `url_verification`
/// is answered with its challenge from `decode`, without I/O. An
/// `im.message.receive_v1` text message from a user becomes a message keyed by its
/// `message_id` (second key "event:<event_id>": Feishu's re-pushes), in the thread of its
/// chat (and its topic, `thread_id` or `root_id`, when it is in one); `@_user_N`
/// mentions are stripped. Other events and message types are acknowledged and skipped.
///
/// Outbound, each part (at most 4,000 characters) replies to the answered message with
/// `POST /im/v1/messages/{message_id}/reply`, a `uuid` made of the thread, run and part
/// (Feishu drops a second copy within an hour), and the tenant access token from
/// `/auth/v3/tenant_access_token/internal`, cached and refreshed 5 minutes before it
/// expires (access_token.hpp). An answer saying the token is invalid or expired
/// (99991663, 99991661, 99991668) drops it and the part is sent again at once with a new
/// one; a rate limit (HTTP 429, code 99991400) is retried after the platform's
/// Retry-After / x-ogw-ratelimit-reset, 5xx with the outbox's back-off.

#include <chrono>
#include <memory>
#include <string>

#include "troupe/net/channel/access_token.hpp"
#include "troupe/net/channel/adapter.hpp"

namespace troupe::net::channel {

struct feishu_options {
  /// The channel's name (logs).
  std::string channel;
  std::string app_id;
  std::string app_secret;
  std::string verification_token;
  /// Empty: the app sends plain bodies and no signature.
  std::string encrypt_key;
  /// "https://open.feishu.cn/open-apis" or a fake's base.
  std::string api_base;
  /// The deadline of a token fetch.
  std::chrono::milliseconds call_deadline{10'000};
};

class feishu_adapter final : public channel_adapter {
public:
  explicit feishu_adapter(feishu_options options);

  expected<void> verify(const http_request& request) const override;
  expected<decoded_request> decode(const http_request& request) const override;
  boost::asio::awaitable<send_result> send(http_client& http, outbound_part part,
                                           std::chrono::milliseconds deadline) override;
  std::vector<std::string> split(std::string_view text) const override;

  /// The token cache (tests count its fetches).
  access_token_cache& tokens() {
    return tokens_;
  }

private:
  /// The plaintext of a body (decrypted when it is `{"encrypt": …}`).
  expected<std::string> plaintext(std::string_view body) const;

  feishu_options options_;
  access_token_cache tokens_;
};

} // namespace troupe::net::channel
