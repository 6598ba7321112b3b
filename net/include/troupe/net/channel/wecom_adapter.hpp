#pragma once

/// \file
/// The WeCom (企业微信) channel: a self-built app's callback in, `message/send` out
/// (the crypto and XML are wechat_wire.hpp).
///
/// GET, the URL check: `msg_signature` (SHA-1 of the sorted token, timestamp, nonce and
/// `echostr`) is checked in constant time, `echostr` decrypted and its plaintext
/// answered. POST: an XML body whose `<Encrypt>` is signed the same way, decrypted with
/// the EncodingAESKey (its receive id must be the corp id); a text message (`MsgType`
/// text) becomes a message keyed by its `MsgId`, in the thread of its sender
/// (`FromUserName`), who is also where the reply goes; events and other types are
/// acknowledged and skipped. WeCom is answered with an empty 200 (no passive reply: the
/// answer comes later) once the message is journaled, well inside its 5 s.
///
/// Replies: `POST {api_base}/cgi-bin/message/send?access_token=…` with touser, msgtype
/// text and agentid, one per part of at most 2,048 bytes. The token comes from
/// `GET {api_base}/cgi-bin/gettoken?corpid=…&corpsecret=…` (7,200 s), cached and
/// refreshed 5 minutes before it expires; errcodes 40014, 42001 and 40001 (invalid or
/// expired token) fetch a new one and send again; 45009, 45033, 45047, 45011 and -1
/// (frequency limits, system busy) and 5xx are retried by the outbox. WeCom limits an app
/// to 30 messages a minute and 1,000 an hour per member (what goes beyond is dropped);
/// the outbox's retries back off on the 45009 it answers.

#include <chrono>
#include <memory>
#include <string>

#include "troupe/net/channel/access_token.hpp"
#include "troupe/net/channel/adapter.hpp"
#include "troupe/net/channel/wechat_wire.hpp"

namespace troupe::net::channel {

struct wecom_options {
  std::string channel;
  std::string corp_id;
  std::string agent_id;
  /// The app's Secret (gettoken's corpsecret).
  std::string secret;
  /// The callback Token and EncodingAESKey.
  std::string token;
  std::string encoding_aes_key;
  /// "https://qyapi.weixin.qq.com" or a fake's base.
  std::string api_base;
};

class wecom_adapter final : public channel_adapter {
public:
  /// An invalid_argument when the EncodingAESKey is not 43 characters of base64.
  static expected<std::shared_ptr<wecom_adapter>> make(wecom_options options);

  expected<void> verify(const http_request& request) const override;
  expected<handshake_answer> answer_get(const http_request& request) const override;
  expected<decoded_request> decode(const http_request& request) const override;
  boost::asio::awaitable<send_result> send(http_client& http, outbound_part part,
                                           std::chrono::milliseconds deadline) override;
  std::vector<std::string> split(std::string_view text) const override;

  wecom_adapter(wecom_options options, wechat::cipher cipher);

private:
  wecom_options options_;
  wechat::cipher cipher_;
  access_token_cache tokens_;
};

} // namespace troupe::net::channel
