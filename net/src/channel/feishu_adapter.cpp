#include "troupe/net/channel/feishu_adapter.hpp"

#include <fmt/format.h>

#include "platform_wire.hpp"
#include "troupe/net/channel/feishu_wire.hpp"
#include "troupe/runtime/channel/text.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/log.hpp"

namespace troupe::net::channel {

namespace asio = boost::asio;

namespace {

/// POST /auth/v3/tenant_access_token/internal.
asio::awaitable<expected<access_token>> fetch_tenant_token(http_client& http, std::string api_base,
                                                           std::string app_id,
                                                           std::string app_secret,
                                                           std::chrono::milliseconds deadline) {
  auto fetching =
      http.fetch(json_post(channel_json::join_url(api_base, "auth/v3/tenant_access_token/internal"),
                           feishu::encode_token_request(app_id, app_secret), deadline));
  auto response = co_await std::move(fetching);
  if (!response) {
    co_return tl::unexpected(response.error());
  }
  const auto a = feishu::classify_answer(response->status, response->header("retry-after"),
                                         response->header("x-ogw-ratelimit-reset"), response->body);
  if (!a.ok() || a.token.empty()) {
    co_return fail(errc::unavailable, fmt::format("Feishu tenant_access_token: HTTP {} code {} {}",
                                                  a.http_status, a.code, a.msg));
  }
  co_return access_token{a.token,
                         std::chrono::steady_clock::now() + std::chrono::seconds(a.expire)};
}

/// A stable id of one part (Feishu's `uuid`, at most 50 characters).
std::string part_uuid(const outbound_part& part) {
  return sha256_hex(fmt::format("{}\n{}\n{}", part.thread_key, part.run_id, part.part))
      .substr(0, 40);
}

} // namespace

feishu_adapter::feishu_adapter(feishu_options options)
    : options_(std::move(options)), tokens_([o = options_](http_client& http) {
        return fetch_tenant_token(http, o.api_base, o.app_id, o.app_secret, o.call_deadline);
      }) {}

expected<std::string> feishu_adapter::plaintext(std::string_view body) const {
  auto sealed = feishu::encrypted_member(body);
  if (!sealed) {
    return tl::unexpected(sealed.error());
  }
  if (!*sealed) {
    return std::string(body);
  }
  if (options_.encrypt_key.empty()) {
    return fail(errc::invalid_argument,
                "an encrypted Feishu body, and the channel has no encrypt_key_env");
  }
  return feishu::decrypt(options_.encrypt_key, **sealed);
}

expected<void> feishu_adapter::verify(const http_request& request) const {
  const auto denied = [](std::string_view why) {
    return fail(errc::permission_denied, fmt::format("the Feishu request {}", why));
  };
  const auto signature = request.header(feishu::signature_header);
  if (!options_.encrypt_key.empty() && !signature.empty() &&
      !feishu::verify_signature(request.header(feishu::timestamp_header),
                                request.header(feishu::nonce_header), options_.encrypt_key,
                                request.body, signature)) {
    return denied("has a wrong X-Lark-Signature");
  }
  auto plain = plaintext(request.body);
  if (!plain) {
    return denied(fmt::format("cannot be read: {}", plain.error().message));
  }
  auto ev = feishu::decode_event(*plain);
  if (!ev) {
    return denied(fmt::format("cannot be read: {}", ev.error().message));
  }
  if (!options_.encrypt_key.empty() && signature.empty() &&
      ev->type != feishu::event::kind::url_verification) {
    // Feishu signs every event of an app with an encrypt key.
    return denied("has no X-Lark-Signature");
  }
  if (options_.verification_token.empty() ||
      !constant_time_equal(ev->token, options_.verification_token)) {
    return denied("has a wrong verification token");
  }
  return {};
}

expected<decoded_request> feishu_adapter::decode(const http_request& request) const {
  auto plain = plaintext(request.body);
  if (!plain) {
    return fail(errc::invalid_argument, plain.error().message);
  }
  auto ev = feishu::decode_event(*plain);
  if (!ev) {
    return fail(errc::invalid_argument, ev.error().message);
  }
  decoded_request out;
  if (ev->type == feishu::event::kind::url_verification) {
    out.response_body = feishu::encode_challenge_answer(ev->challenge);
    return out;
  }
  if (ev->type != feishu::event::kind::message || ev->message_type != "text" ||
      ev->sender_type == "app" || ev->text.empty()) {
    return out; // acknowledged, nothing to answer
  }
  inbound_message m;
  m.message_id = ev->message_id;
  if (!ev->event_id.empty()) {
    m.delivery_id = "event:" + ev->event_id;
  }
  const auto& topic = !ev->thread_id.empty() ? ev->thread_id : ev->root_id;
  m.thread = topic.empty() ? ev->chat_id : ev->chat_id + ':' + topic;
  m.sender = ev->sender;
  m.text = std::move(ev->text);
  m.reply_to = ev->message_id;
  out.messages.push_back(std::move(m));
  return out;
}

std::vector<std::string> feishu_adapter::split(std::string_view text) const {
  return troupe::channel::split_message(text, feishu::message_limit);
}

asio::awaitable<send_result> feishu_adapter::send(http_client& http, outbound_part part,
                                                  std::chrono::milliseconds deadline) {
  send_result out;
  if (part.reply_to.empty()) {
    out.error = "no Feishu message to reply to";
    co_return out;
  }
  const auto url = channel_json::join_url(options_.api_base,
                                          fmt::format("im/v1/messages/{}/reply", part.reply_to));
  const auto body = feishu::encode_reply(part.text, part_uuid(part));
  // A rejected token is dropped and the part sent once more with a new one.
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto getting = tokens_.get(http);
    auto token = co_await std::move(getting);
    if (!token) {
      out.outcome = send_outcome::retry;
      out.error = "no tenant access token: " + token.error().message;
      co_return out;
    }
    auto request = json_post(url, body, deadline);
    request.headers = {{"Content-Type", "application/json; charset=utf-8"},
                       {"Authorization", "Bearer " + *token}};
    auto fetching = http.fetch(std::move(request));
    auto response = co_await std::move(fetching);
    if (!response) {
      out.outcome = send_outcome::retry;
      out.error = response.error().message;
      co_return out;
    }
    const auto a =
        feishu::classify_answer(response->status, response->header("retry-after"),
                                response->header("x-ogw-ratelimit-reset"), response->body);
    if (a.ok()) {
      out.outcome = send_outcome::sent;
      out.platform_message_id = a.message_id;
      co_return out;
    }
    out.error = fmt::format("HTTP {} code {}: {}", a.http_status, a.code, a.msg);
    if (a.token_rejected()) {
      log::info("feishu channel {}: the tenant access token was refused (code {}); fetching "
                "a new one",
                options_.channel, a.code);
      tokens_.invalidate(*token);
      out.outcome = send_outcome::retry;
      continue;
    }
    out.outcome = a.retryable() ? send_outcome::retry : send_outcome::failed;
    if (a.retry_after) {
      out.retry_after = *a.retry_after;
    }
    co_return out;
  }
  co_return out;
}

} // namespace troupe::net::channel
