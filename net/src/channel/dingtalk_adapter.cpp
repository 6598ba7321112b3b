#include "troupe/net/channel/dingtalk_adapter.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "platform_wire.hpp"
#include "troupe/net/channel/dingtalk_wire.hpp"
#include "troupe/runtime/channel/text.hpp"
#include "troupe/runtime/log.hpp"

namespace troupe::net::channel {

namespace asio = boost::asio;

namespace {

/// POST /v1.0/oauth2/accessToken.
asio::awaitable<expected<access_token>> fetch_app_token(http_client& http, std::string api_base,
                                                        std::string app_key, std::string app_secret,
                                                        std::chrono::milliseconds deadline) {
  auto fetching =
      http.fetch(json_post(channel_json::join_url(api_base, "v1.0/oauth2/accessToken"),
                           dingtalk::encode_token_request(app_key, app_secret), deadline));
  auto response = co_await std::move(fetching);
  if (!response) {
    co_return tl::unexpected(response.error());
  }
  const auto a =
      dingtalk::classify_answer(response->status, response->header("retry-after"), response->body);
  if (!a.http_ok() || a.access_token.empty()) {
    co_return fail(errc::unavailable, fmt::format("DingTalk accessToken: HTTP {} {} {}",
                                                  a.http_status, a.code, a.message));
  }
  co_return access_token{a.access_token,
                         std::chrono::steady_clock::now() + std::chrono::seconds(a.expire_in)};
}

/// "scheme://host[:port]" of a URL, lower-cased; empty when it has none.
struct url_origin {
  std::string scheme;
  std::string host;
  std::string port;
};

std::optional<url_origin> origin_of(std::string_view url) {
  const auto colon = url.find("://");
  if (colon == std::string_view::npos) {
    return std::nullopt;
  }
  url_origin o;
  o.scheme = std::string(url.substr(0, colon));
  auto rest = url.substr(colon + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (rest.find('@') != std::string_view::npos || rest.empty()) {
    return std::nullopt; // no user info in a platform URL
  }
  if (const auto c = rest.rfind(':'); c != std::string_view::npos && rest.front() != '[') {
    o.port = std::string(rest.substr(c + 1));
    rest = rest.substr(0, c);
  }
  o.host = std::string(rest);
  for (auto* s : {&o.scheme, &o.host}) {
    std::transform(s->begin(), s->end(), s->begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  }
  if (o.port.empty()) {
    o.port = o.scheme == "https" ? "443" : "80";
  }
  return o;
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

send_result from_answer(const dingtalk::answer& a) {
  send_result out;
  out.error =
      fmt::format("HTTP {} {}{}: {}", a.http_status, a.code,
                  a.errcode > 0 ? fmt::format("errcode {}", a.errcode) : std::string(), a.message);
  out.outcome = a.retryable() ? send_outcome::retry : send_outcome::failed;
  if (a.retry_after) {
    out.retry_after = *a.retry_after;
  }
  return out;
}

} // namespace

bool dingtalk_webhook_allowed(std::string_view webhook, std::string_view api_base) {
  const auto w = origin_of(webhook);
  if (!w) {
    return false;
  }
  if (w->scheme == "https" && (w->host == "dingtalk.com" || w->host.ends_with(".dingtalk.com"))) {
    return true;
  }
  const auto base = origin_of(api_base);
  return base && base->scheme == w->scheme && base->host == w->host && base->port == w->port;
}

dingtalk_adapter::dingtalk_adapter(dingtalk_options options)
    : options_(std::move(options)), tokens_([o = options_](http_client& http) {
        return fetch_app_token(http, o.api_base, o.app_key, o.app_secret, o.call_deadline);
      }) {
  if (options_.robot_code.empty()) {
    options_.robot_code = options_.app_key;
  }
}

expected<void> dingtalk_adapter::verify(const http_request& request) const {
  const auto check = dingtalk::verify_signature(
      options_.app_secret, request.header(dingtalk::timestamp_header),
      request.header(dingtalk::sign_header), std::chrono::system_clock::now());
  if (check != dingtalk::signature_check::valid) {
    return fail(errc::permission_denied, fmt::format("the DingTalk signature is not valid ({})",
                                                     dingtalk::to_string(check)));
  }
  return {};
}

expected<decoded_request> dingtalk_adapter::decode(const http_request& request) const {
  auto m = dingtalk::decode_message(request.body);
  if (!m) {
    return fail(errc::invalid_argument, m.error().message);
  }
  decoded_request out;
  if (m->msgtype != "text" || m->text.empty()) {
    return out;
  }
  inbound_message in;
  in.message_id = m->msg_id;
  in.thread = m->conversation_id;
  in.sender = !m->sender_staff_id.empty() ? m->sender_staff_id : m->sender_id;
  in.text = std::move(m->text);
  dingtalk::reply_target t;
  t.session_webhook = m->session_webhook;
  t.session_webhook_expires_ms = m->session_webhook_expires_ms;
  t.conversation_id = m->conversation_id;
  t.conversation_type = m->conversation_type;
  t.user_id = in.sender;
  in.reply_to = dingtalk::encode_reply_target(t);
  out.messages.push_back(std::move(in));
  return out;
}

std::vector<std::string> dingtalk_adapter::split(std::string_view text) const {
  return troupe::channel::split_message(text, dingtalk::message_limit);
}

asio::awaitable<send_result> dingtalk_adapter::send(http_client& http, outbound_part part,
                                                    std::chrono::milliseconds deadline) {
  const auto target = dingtalk::decode_reply_target(part.reply_to);
  if (!target) {
    send_result out;
    out.error = "not a DingTalk reply target";
    co_return out;
  }
  const bool webhook_valid =
      !target->session_webhook.empty() &&
      now_ms() + options_.webhook_margin.count() < target->session_webhook_expires_ms;
  if (webhook_valid && !dingtalk_webhook_allowed(target->session_webhook, options_.api_base)) {
    log::warn("dingtalk channel {}: a session webhook off dingtalk.com is ignored; replying "
              "through the send API",
              options_.channel);
  } else if (webhook_valid) {
    auto fetching = http.fetch(
        json_post(target->session_webhook, dingtalk::encode_webhook_text(part.text), deadline));
    auto response = co_await std::move(fetching);
    if (!response) {
      send_result out;
      out.outcome = send_outcome::retry;
      out.error = response.error().message;
      co_return out;
    }
    const auto a = dingtalk::classify_answer(response->status, response->header("retry-after"),
                                             response->body);
    if (a.http_ok() && a.errcode <= 0 && a.code.empty()) {
      send_result out;
      out.outcome = send_outcome::sent;
      co_return out;
    }
    if (a.retryable()) {
      co_return from_answer(a);
    }
    log::info("dingtalk channel {}: the session webhook refused a reply (HTTP {} errcode {}); "
              "sending it through the robot API",
              options_.channel, a.http_status, a.errcode);
  }
  auto sending = send_by_api(http, part.reply_to, part.text, deadline);
  co_return co_await std::move(sending);
}

asio::awaitable<send_result> dingtalk_adapter::send_by_api(http_client& http, std::string reply_to,
                                                           std::string text,
                                                           std::chrono::milliseconds deadline) {
  const auto target = dingtalk::decode_reply_target(reply_to).value_or(dingtalk::reply_target{});
  const bool group = target.conversation_type == "2";
  const auto url =
      channel_json::join_url(options_.api_base, group ? "v1.0/robot/groupMessages/send"
                                                      : "v1.0/robot/oToMessages/batchSend");
  const auto body =
      group ? dingtalk::encode_group_send(options_.robot_code, target.conversation_id, text)
            : dingtalk::encode_batch_send(options_.robot_code, target.user_id, text);
  send_result out;
  if ((group && target.conversation_id.empty()) || (!group && target.user_id.empty())) {
    out.error = "the DingTalk message names no conversation or user to answer";
    co_return out;
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto getting = tokens_.get(http);
    auto token = co_await std::move(getting);
    if (!token) {
      out.outcome = send_outcome::retry;
      out.error = "no DingTalk access token: " + token.error().message;
      co_return out;
    }
    auto request = json_post(url, body, deadline);
    request.headers.push_back({std::string(dingtalk::token_header), *token});
    auto fetching = http.fetch(std::move(request));
    auto response = co_await std::move(fetching);
    if (!response) {
      out.outcome = send_outcome::retry;
      out.error = response.error().message;
      co_return out;
    }
    const auto a = dingtalk::classify_answer(response->status, response->header("retry-after"),
                                             response->body);
    if (a.http_ok() && a.code.empty()) {
      out.outcome = send_outcome::sent;
      out.platform_message_id = a.process_query_key;
      out.error.clear();
      co_return out;
    }
    out = from_answer(a);
    if (a.token_rejected()) {
      log::info("dingtalk channel {}: the access token was refused; fetching a new one",
                options_.channel);
      tokens_.invalidate(*token);
      out.outcome = send_outcome::retry;
      continue;
    }
    co_return out;
  }
  co_return out;
}

} // namespace troupe::net::channel
