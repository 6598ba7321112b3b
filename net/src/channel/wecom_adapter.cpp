#include "troupe/net/channel/wecom_adapter.hpp"

#include <fmt/format.h>

#include "platform_wire.hpp"
#include "troupe/runtime/channel/text.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "wechat_api.hpp"

namespace troupe::net::channel {

namespace asio = boost::asio;

namespace {

/// Fetches WeCom's access token (not a lambda coroutine: its parameters are copies).
access_token_cache::fetcher wecom_fetcher(const wecom_options& o) {
  auto url = wechat::url_with_query(channel_json::join_url(o.api_base, "cgi-bin/gettoken"),
                                    {{"corpid", o.corp_id}, {"corpsecret", o.secret}});
  return [url](http_client& http) { return wechat::fetch_token(http, url); };
}

std::string encode_send(std::string_view to_user, std::string_view agent_id,
                        std::string_view text) {
  json_writer w;
  w.begin_object();
  w.key("touser").value(to_user);
  w.key("msgtype").value("text");
  // WeCom's agentid is a number; a config value that is not one goes as text (and WeCom
  // refuses it, naming the problem).
  std::int64_t id = 0;
  bool numeric = !agent_id.empty();
  for (const char c : agent_id) {
    numeric = numeric && c >= '0' && c <= '9' && id < (INT64_MAX - 9) / 10;
    id = numeric ? id * 10 + (c - '0') : id;
  }
  if (numeric) {
    w.key("agentid").value(id);
  } else {
    w.key("agentid").value(agent_id);
  }
  w.key("text").begin_object().key("content").value(text).end_object();
  w.end_object();
  return std::move(w).str();
}

} // namespace

expected<std::shared_ptr<wecom_adapter>> wecom_adapter::make(wecom_options options) {
  auto cipher = wechat::cipher::from_encoding_aes_key(options.encoding_aes_key);
  if (!cipher) {
    return fail(errc::invalid_argument,
                fmt::format("channel '{}': {}", options.channel, cipher.error().message));
  }
  return std::make_shared<wecom_adapter>(std::move(options), std::move(*cipher));
}

wecom_adapter::wecom_adapter(wecom_options options, wechat::cipher cipher)
    : options_(std::move(options)), cipher_(std::move(cipher)), tokens_(wecom_fetcher(options_)) {}

expected<void> wecom_adapter::verify(const http_request& request) const {
  auto encrypted = wechat::encrypted_field(request.body);
  if (!encrypted) {
    // Unsigned garbage is refused as unsigned: nothing of it is read further.
    return fail(errc::permission_denied,
                "not a signed WeCom callback: " + encrypted.error().message);
  }
  const auto timestamp = request.query_param("timestamp");
  const auto nonce = request.query_param("nonce");
  if (!wechat::signature_matches({options_.token, timestamp, nonce, *encrypted},
                                 request.query_param("msg_signature"))) {
    return fail(errc::permission_denied, "the WeCom msg_signature is not valid");
  }
  return {};
}

expected<handshake_answer> wecom_adapter::answer_get(const http_request& request) const {
  const auto echostr = request.query_param("echostr");
  if (echostr.empty() ||
      !wechat::signature_matches(
          {options_.token, request.query_param("timestamp"), request.query_param("nonce"), echostr},
          request.query_param("msg_signature"))) {
    return fail(errc::permission_denied, "the WeCom URL check's msg_signature is not valid");
  }
  auto plain = cipher_.decrypt(echostr, options_.corp_id);
  if (!plain) {
    return fail(errc::invalid_argument, "the WeCom echostr: " + plain.error().message);
  }
  handshake_answer out;
  out.body = std::move(*plain);
  return out;
}

expected<decoded_request> wecom_adapter::decode(const http_request& request) const {
  auto encrypted = wechat::encrypted_field(request.body);
  if (!encrypted) {
    return tl::unexpected(encrypted.error());
  }
  auto xml = cipher_.decrypt(*encrypted, options_.corp_id);
  if (!xml) {
    return tl::unexpected(xml.error());
  }
  auto message = wechat::decode_message(*xml);
  if (!message) {
    return tl::unexpected(message.error());
  }
  decoded_request out;
  // An empty 200: WeCom does not deliver again, and shows nothing.
  out.empty_response = true;
  wechat::add_text_message(out, std::move(*message));
  return out;
}

std::vector<std::string> wecom_adapter::split(std::string_view text) const {
  return troupe::channel::split_message_bytes(text, wechat::text_limit_bytes);
}

asio::awaitable<send_result> wecom_adapter::send(http_client& http, outbound_part part,
                                                 std::chrono::milliseconds deadline) {
  wechat::error_codes codes;
  codes.token = {40014, 42001, 40001};
  codes.retry = {45009, 45033, 45047, 45011, -1};
  auto sending = wechat::send_with_token(
      http, tokens_, channel_json::join_url(options_.api_base, "cgi-bin/message/send"),
      encode_send(part.reply_to, options_.agent_id, part.text), deadline, std::move(codes),
      "wecom channel " + options_.channel);
  co_return co_await std::move(sending);
}

} // namespace troupe::net::channel
