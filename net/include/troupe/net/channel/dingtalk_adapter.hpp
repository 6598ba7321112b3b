#pragma once

/// \file
/// The DingTalk robot channel in HTTP callback mode (the wire format is
/// dingtalk_wire.hpp). A callback is verified by its `timestamp` (milliseconds, within
/// an hour of now) and `sign` (base64 HMAC-SHA256 under the app secret of
/// "timestamp\nsecret", compared in constant time) before anything of it is kept. A text
/// message becomes a message keyed by its `msgId`, in the thread of its `conversationId`,
/// from its `senderStaffId` (`senderId` when there is none); other message types are
/// acknowledged and skipped.
///
/// Outbound, each part (at most 5,000 characters) goes through the message's
/// `sessionWebhook` while it is valid (until `sessionWebhookExpiredTime` less a minute),
/// and otherwise, or when the webhook refuses it (other than a rate limit or a 5xx),
/// through the robot send API: `/v1.0/robot/oToMessages/batchSend` to the sender of a
/// single chat, `/v1.0/robot/groupMessages/send` to a group, with the app's access token
/// (`/v1.0/oauth2/accessToken`, cached and refreshed 5 minutes before it expires) in
/// `x-acs-dingtalk-access-token`. A refused token is dropped and the part sent again at
/// once with a new one; HTTP 429 and throttling codes are retried after Retry-After.
///
/// A session webhook is a URL the platform gives, and troupe posts the reply to it: it is
/// used only when it is https on dingtalk.com (or a subdomain), or on the channel's own
/// `api_base` origin (a test's fake platform); any other is ignored, the send API used.

#include <chrono>
#include <string>

#include "troupe/net/channel/access_token.hpp"
#include "troupe/net/channel/adapter.hpp"

namespace troupe::net::channel {

struct dingtalk_options {
  std::string channel;
  std::string app_key;
  std::string app_secret;
  /// The robot's code for the send API; empty: the app key.
  std::string robot_code;
  /// "https://api.dingtalk.com" or a fake's base.
  std::string api_base;
  std::chrono::milliseconds call_deadline{10'000};
  /// A session webhook is not used in its last minute.
  std::chrono::milliseconds webhook_margin{60'000};
};

/// Whether troupe posts to `webhook` (see the file comment).
bool dingtalk_webhook_allowed(std::string_view webhook, std::string_view api_base);

class dingtalk_adapter final : public channel_adapter {
public:
  explicit dingtalk_adapter(dingtalk_options options);

  expected<void> verify(const http_request& request) const override;
  expected<decoded_request> decode(const http_request& request) const override;
  boost::asio::awaitable<send_result> send(http_client& http, outbound_part part,
                                           std::chrono::milliseconds deadline) override;
  std::vector<std::string> split(std::string_view text) const override;

  access_token_cache& tokens() {
    return tokens_;
  }

private:
  boost::asio::awaitable<send_result> send_by_api(http_client& http, std::string reply_to,
                                                  std::string text,
                                                  std::chrono::milliseconds deadline);

  dingtalk_options options_;
  access_token_cache tokens_;
};

} // namespace troupe::net::channel
