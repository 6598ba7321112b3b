#pragma once

/// \file
/// The channel facade: what the HTTP layer may do with messaging channels, without
/// seeing an actor. Implemented in actors/ by the channel service (channel_service.hpp).

#include <string>

#include <boost/asio/awaitable.hpp>

#include "troupe/net/http_message.hpp"

namespace troupe::actors {

class channel_facade {
public:
  virtual ~channel_facade() = default;

  /// Answers `POST /api/v1/webhooks/channels/{name}`: the channel's adapter verifies the
  /// request (401, nothing journaled, when it fails), decodes it (400), and every message
  /// in it is journaled, durably, before the answer (200 at once: the reply comes later,
  /// through the outbox). A message journaled before (a platform's redelivery, also
  /// after a restart) is acknowledged again and not processed twice. 404 for a channel
  /// that does not exist or is disabled.
  virtual boost::asio::awaitable<net::http_response> receive(std::string name,
                                                             net::http_request request) = 0;

  /// Answers `GET /api/v1/webhooks/channels/{name}`, a platform's URL check (WeChat's
  /// and WeCom's echostr, WhatsApp's hub.challenge), with the channel's adapter; nothing
  /// is journaled. 403 when its verification fails, 400 for a malformed check, 405 for a
  /// platform that makes none, 404 for a channel that does not exist or is disabled.
  virtual boost::asio::awaitable<net::http_response> handshake(std::string name,
                                                               net::http_request request) = 0;

  /// Channel `name` was changed or deleted over the API: later messages use its new
  /// settings (threads already live finish what they hold with the old ones).
  virtual void forget(const std::string& name) = 0;
};

} // namespace troupe::actors
