#pragma once

/// \file
/// The WeChat Official Account (公众号) channel: the server callback in, the
/// customer-service message API out (the crypto and XML are wechat_wire.hpp).
///
/// GET, the URL check: `signature` (SHA-1 of the sorted token, timestamp and nonce) is
/// checked in constant time and `echostr` echoed. POST: every request carries that
/// `signature`; in plain mode the body is the message's XML; with `encrypt_type=aes` (the
/// channel has an `aes_key_env`) the body's `<Encrypt>` is also signed (`msg_signature`)
/// and decrypted like WeCom's, its receive id the app id. A text message becomes a
/// message keyed by its `MsgId`, in the thread of its sender's OpenID; WeChat is answered
/// `success` (no passive reply) once it is journaled, inside its 5 s.
///
/// Replies: `POST {api_base}/cgi-bin/message/custom/send?access_token=…` (touser, msgtype
/// text), one per part of at most 2,048 bytes; the token from
/// `GET {api_base}/cgi-bin/token?grant_type=client_credential&appid=…&secret=…`, cached
/// and refreshed before it expires; errcodes 40001, 40014 and 42001 fetch a new one and
/// send again; 45047 (too many customer-service messages), 45009 and -1 are retried;
/// 45015 (the user wrote more than 48 hours ago) is final.

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "troupe/net/channel/access_token.hpp"
#include "troupe/net/channel/adapter.hpp"
#include "troupe/net/channel/wechat_wire.hpp"

namespace troupe::net::channel {

struct wechat_mp_options {
  std::string channel;
  std::string app_id;
  std::string app_secret;
  /// The server configuration's Token, and its EncodingAESKey (empty: plain mode).
  std::string token;
  std::string encoding_aes_key;
  /// "https://api.weixin.qq.com" or a fake's base.
  std::string api_base;
};

class wechat_mp_adapter final : public channel_adapter {
public:
  /// An invalid_argument when an EncodingAESKey is set and not 43 characters of base64.
  static expected<std::shared_ptr<wechat_mp_adapter>> make(wechat_mp_options options);

  expected<void> verify(const http_request& request) const override;
  expected<handshake_answer> answer_get(const http_request& request) const override;
  expected<decoded_request> decode(const http_request& request) const override;
  boost::asio::awaitable<send_result> send(http_client& http, outbound_part part,
                                           std::chrono::milliseconds deadline) override;
  std::vector<std::string> split(std::string_view text) const override;

  wechat_mp_adapter(wechat_mp_options options, std::optional<wechat::cipher> cipher);

private:
  /// The message XML of a verified request (decrypted when encrypted).
  expected<std::string> message_xml(const http_request& request) const;

  wechat_mp_options options_;
  std::optional<wechat::cipher> cipher_;
  access_token_cache tokens_;
};

} // namespace troupe::net::channel
