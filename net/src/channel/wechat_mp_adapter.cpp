#include "troupe/net/channel/wechat_mp_adapter.hpp"

#include <fmt/format.h>

#include "platform_wire.hpp"
#include "troupe/runtime/channel/text.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "wechat_api.hpp"

namespace troupe::net::channel {

namespace asio = boost::asio;

namespace {

access_token_cache::fetcher wechat_fetcher(const wechat_mp_options& o) {
  auto url = wechat::url_with_query(
      channel_json::join_url(o.api_base, "cgi-bin/token"),
      {{"grant_type", "client_credential"}, {"appid", o.app_id}, {"secret", o.app_secret}});
  return [url](http_client& http) { return wechat::fetch_token(http, url); };
}

std::string encode_send(std::string_view to_user, std::string_view text) {
  json_writer w;
  w.begin_object();
  w.key("touser").value(to_user);
  w.key("msgtype").value("text");
  w.key("text").begin_object().key("content").value(text).end_object();
  w.end_object();
  return std::move(w).str();
}

bool encrypted(const http_request& request) {
  return request.query_param("encrypt_type") == "aes";
}

} // namespace

expected<std::shared_ptr<wechat_mp_adapter>> wechat_mp_adapter::make(wechat_mp_options options) {
  std::optional<wechat::cipher> cipher;
  if (!options.encoding_aes_key.empty()) {
    auto made = wechat::cipher::from_encoding_aes_key(options.encoding_aes_key);
    if (!made) {
      return fail(errc::invalid_argument,
                  fmt::format("channel '{}': {}", options.channel, made.error().message));
    }
    cipher = std::move(*made);
  }
  return std::make_shared<wechat_mp_adapter>(std::move(options), std::move(cipher));
}

wechat_mp_adapter::wechat_mp_adapter(wechat_mp_options options,
                                     std::optional<wechat::cipher> cipher)
    : options_(std::move(options)), cipher_(std::move(cipher)), tokens_(wechat_fetcher(options_)) {}

expected<void> wechat_mp_adapter::verify(const http_request& request) const {
  const auto timestamp = request.query_param("timestamp");
  const auto nonce = request.query_param("nonce");
  if (!wechat::signature_matches({options_.token, timestamp, nonce},
                                 request.query_param("signature"))) {
    return fail(errc::permission_denied, "the WeChat signature is not valid");
  }
  if (encrypted(request)) {
    auto field = wechat::encrypted_field(request.body);
    if (!field || !wechat::signature_matches({options_.token, timestamp, nonce, *field},
                                             request.query_param("msg_signature"))) {
      return fail(errc::permission_denied, "the WeChat msg_signature is not valid");
    }
  }
  return {};
}

expected<handshake_answer> wechat_mp_adapter::answer_get(const http_request& request) const {
  const auto echostr = request.query_param("echostr");
  if (echostr.empty() ||
      !wechat::signature_matches(
          {options_.token, request.query_param("timestamp"), request.query_param("nonce")},
          request.query_param("signature"))) {
    return fail(errc::permission_denied, "the WeChat URL check's signature is not valid");
  }
  handshake_answer out;
  out.body = echostr;
  return out;
}

expected<std::string> wechat_mp_adapter::message_xml(const http_request& request) const {
  if (!encrypted(request)) {
    return request.body;
  }
  if (!cipher_) {
    return fail(errc::invalid_argument,
                "an encrypted WeChat message, and the channel has no aes_key_env");
  }
  auto field = wechat::encrypted_field(request.body);
  if (!field) {
    return tl::unexpected(field.error());
  }
  return cipher_->decrypt(*field, options_.app_id);
}

expected<decoded_request> wechat_mp_adapter::decode(const http_request& request) const {
  auto xml = message_xml(request);
  if (!xml) {
    return tl::unexpected(xml.error());
  }
  auto message = wechat::decode_message(*xml);
  if (!message) {
    return tl::unexpected(message.error());
  }
  decoded_request out;
  out.response_body = "success";
  out.response_content_type = "text/plain; charset=utf-8";
  wechat::add_text_message(out, std::move(*message));
  return out;
}

std::vector<std::string> wechat_mp_adapter::split(std::string_view text) const {
  return troupe::channel::split_message_bytes(text, wechat::text_limit_bytes);
}

asio::awaitable<send_result> wechat_mp_adapter::send(http_client& http, outbound_part part,
                                                     std::chrono::milliseconds deadline) {
  wechat::error_codes codes;
  codes.token = {40001, 40014, 42001};
  codes.retry = {45047, 45009, -1};
  auto sending = wechat::send_with_token(
      http, tokens_, channel_json::join_url(options_.api_base, "cgi-bin/message/custom/send"),
      encode_send(part.reply_to, part.text), deadline, std::move(codes),
      "wechat_mp channel " + options_.channel);
  co_return co_await std::move(sending);
}

} // namespace troupe::net::channel
