#include "troupe/net/channel/whatsapp_adapter.hpp"

#include <charconv>

#include <fmt/format.h>

#include "platform_wire.hpp"
#include "troupe/runtime/channel/text.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/runtime/log.hpp"

namespace troupe::net::channel {

namespace asio = boost::asio;
namespace cj = channel_json;

namespace whatsapp {

namespace {

std::optional<std::int64_t> parse_int(std::string_view text) {
  std::int64_t value = 0;
  const auto* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || at != end || text.empty()) {
    return std::nullopt;
  }
  return value;
}

} // namespace

bool signature_valid(std::string_view app_secret, std::string_view header, std::string_view body) {
  constexpr std::string_view prefix = "sha256=";
  if (app_secret.empty() || !header.starts_with(prefix)) {
    return false;
  }
  const auto expected_hex = to_hex(hmac_sha256(app_secret, body));
  return constant_time_equal(expected_hex, header.substr(prefix.size()));
}

expected<std::vector<text_message>> decode_webhook(std::string_view body,
                                                   std::string_view phone_number_id) {
  auto doc = cj::document::parse_object(body, "WhatsApp webhook");
  if (!doc) {
    return fail(errc::invalid_argument, doc.error().message);
  }
  const auto root = doc->root();
  if (cj::text_member(root, "object") != "whatsapp_business_account") {
    return fail(errc::invalid_argument,
                "not a WhatsApp webhook (object is not whatsapp_business_account)");
  }
  std::vector<text_message> out;
  auto entries = cj::array_member(root, "entry");
  if (!entries) {
    return out;
  }
  for (auto entry : *entries) {
    cj::dom::object e;
    if (entry.get_object().get(e) != simdjson::SUCCESS) {
      continue;
    }
    auto changes = cj::array_member(e, "changes");
    if (!changes) {
      continue;
    }
    for (auto change : *changes) {
      cj::dom::object c;
      if (change.get_object().get(c) != simdjson::SUCCESS) {
        continue;
      }
      auto value = cj::object_member(c, "value");
      if (!value) {
        continue;
      }
      // Messages for another number of the same business account are not ours.
      if (auto meta = cj::object_member(*value, "metadata")) {
        const auto id = cj::string_member(*meta, "phone_number_id");
        if (id && *id != phone_number_id) {
          continue;
        }
      }
      auto messages = cj::array_member(*value, "messages");
      if (!messages) {
        continue; // statuses (sent, delivered, read) and other updates
      }
      for (auto message : *messages) {
        cj::dom::object m;
        if (message.get_object().get(m) != simdjson::SUCCESS ||
            cj::text_member(m, "type") != "text") {
          continue;
        }
        auto text = cj::object_member(m, "text");
        text_message t;
        t.id = cj::text_member(m, "id");
        t.from = cj::text_member(m, "from");
        t.timestamp = parse_int(cj::text_member(m, "timestamp")).value_or(0);
        t.body = text ? cj::text_member(*text, "body") : std::string();
        if (t.id.empty() || t.from.empty() || t.body.empty()) {
          continue;
        }
        out.push_back(std::move(t));
      }
    }
  }
  return out;
}

std::string encode_send(std::string_view to, std::string_view text) {
  json_writer w;
  w.begin_object();
  w.key("messaging_product").value("whatsapp");
  w.key("recipient_type").value("individual");
  w.key("to").value(to);
  w.key("type").value("text");
  w.key("text").begin_object().key("preview_url").value(false).key("body").value(text).end_object();
  w.end_object();
  return std::move(w).str();
}

send_answer read_send_answer(std::string_view body, unsigned status) {
  send_answer out;
  auto doc = cj::document::parse_object(body, "WhatsApp answer");
  if (doc) {
    if (auto error = cj::object_member(doc->root(), "error")) {
      out.code = cj::int_member(*error, "code").value_or(0);
      out.message = cj::text_member(*error, "message");
    }
    if (auto messages = cj::array_member(doc->root(), "messages")) {
      for (auto m : *messages) {
        cj::dom::object o;
        if (m.get_object().get(o) == simdjson::SUCCESS) {
          out.message_id = cj::text_member(o, "id");
          break;
        }
      }
    }
  }
  out.ok = status >= 200 && status < 300 && out.code == 0;
  return out;
}

std::string encode_reply_to(std::string_view wa_id, std::int64_t unix_seconds) {
  return fmt::format("{}@{}", wa_id, unix_seconds);
}

std::optional<reply_target> parse_reply_to(std::string_view reply_to) {
  const auto at = reply_to.rfind('@');
  if (at == 0 || at == std::string_view::npos) {
    return std::nullopt;
  }
  auto seconds = parse_int(reply_to.substr(at + 1));
  if (!seconds) {
    return std::nullopt;
  }
  return reply_target{std::string(reply_to.substr(0, at)), *seconds};
}

} // namespace whatsapp

whatsapp_adapter::whatsapp_adapter(whatsapp_options options) : options_(std::move(options)) {
  if (options_.token_source) {
    token_ = options_.token_source();
  }
}

std::string whatsapp_adapter::token() const {
  std::lock_guard lock(mutex_);
  return token_;
}

std::string whatsapp_adapter::refresh_token(const std::string& refused) {
  auto fresh = options_.token_source ? options_.token_source() : std::string();
  std::lock_guard lock(mutex_);
  if (token_ == refused && !fresh.empty()) {
    token_ = std::move(fresh);
  }
  return token_;
}

expected<void> whatsapp_adapter::verify(const http_request& request) const {
  if (!whatsapp::signature_valid(options_.app_secret, request.header(whatsapp::signature_header),
                                 request.body)) {
    return fail(errc::permission_denied, "the X-Hub-Signature-256 signature is not valid");
  }
  return {};
}

expected<handshake_answer> whatsapp_adapter::answer_get(const http_request& request) const {
  const auto mode = request.query_param("hub.mode");
  const auto token = request.query_param("hub.verify_token");
  if (mode != "subscribe" || options_.verify_token.empty() ||
      !constant_time_equal(token, options_.verify_token)) {
    return fail(errc::permission_denied, "the subscription check's verify token does not match");
  }
  handshake_answer out;
  out.body = request.query_param("hub.challenge");
  return out;
}

expected<decoded_request> whatsapp_adapter::decode(const http_request& request) const {
  auto messages = whatsapp::decode_webhook(request.body, options_.phone_number_id);
  if (!messages) {
    return tl::unexpected(messages.error());
  }
  decoded_request out;
  std::lock_guard lock(mutex_);
  for (auto& t : *messages) {
    auto& last = last_inbound_[t.from];
    last = std::max(last, t.timestamp);
    inbound_message m;
    m.message_id = t.id;
    m.thread = t.from;
    m.sender = t.from;
    m.text = std::move(t.body);
    m.reply_to = whatsapp::encode_reply_to(t.from, t.timestamp);
    out.messages.push_back(std::move(m));
  }
  return out;
}

std::vector<std::string> whatsapp_adapter::split(std::string_view text) const {
  return troupe::channel::split_message(text, whatsapp::text_limit);
}

asio::awaitable<send_result> whatsapp_adapter::send(http_client& http, outbound_part part,
                                                    std::chrono::milliseconds deadline) {
  send_result out;
  const auto target = whatsapp::parse_reply_to(part.reply_to);
  if (!target) {
    out.error = fmt::format("'{}' is not a WhatsApp sender and time", part.reply_to);
    co_return out;
  }
  auto last = target->unix_seconds;
  {
    std::lock_guard lock(mutex_);
    if (auto it = last_inbound_.find(target->wa_id); it != last_inbound_.end()) {
      last = std::max(last, it->second);
    }
  }
  const auto now =
      std::chrono::duration_cast<std::chrono::seconds>(options_.clock().time_since_epoch()).count();
  if (now - last >
      std::chrono::duration_cast<std::chrono::seconds>(whatsapp::service_window).count()) {
    out.error = std::string(whatsapp::window_closed);
    co_return out;
  }
  const auto url = cj::join_url(options_.api_base, options_.phone_number_id + "/messages");
  auto token = this->token();
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto request = json_post(url, whatsapp::encode_send(target->wa_id, part.text), deadline);
    request.headers.push_back({"Authorization", "Bearer " + token});
    auto fetching = http.fetch(std::move(request));
    auto response = co_await std::move(fetching);
    if (!response) {
      out.outcome = send_outcome::retry;
      out.error = response.error().message;
      co_return out;
    }
    const auto answer = whatsapp::read_send_answer(response->body, response->status);
    if (answer.ok) {
      out.outcome = send_outcome::sent;
      out.error.clear();
      out.platform_message_id = answer.message_id;
      co_return out;
    }
    out.error = fmt::format("HTTP {}: error {}: {}", response->status, answer.code,
                            cj::excerpt(answer.message));
    if (response->status == 401 || answer.code == 190) {
      // An expired or revoked token: read it again (a rotated one) and try once more;
      // still refused, the outbox tries later.
      log::warn("whatsapp channel {}: the access token was refused; reading it again",
                options_.channel);
      token = refresh_token(token);
      out.outcome = send_outcome::retry;
      continue;
    }
    if (answer.code == 131047) {
      out.outcome = send_outcome::failed;
      out.error = fmt::format("{} (error 131047: {})", whatsapp::window_closed,
                              cj::excerpt(answer.message));
      co_return out;
    }
    const bool rate_limited = response->status == 429 || answer.code == 130429 ||
                              answer.code == 131056 || answer.code == 131048 ||
                              answer.code == 80007 || answer.code == 4;
    if (rate_limited || response->status >= 500) {
      auto classified = classify_http_status(rate_limited ? 429 : response->status,
                                             response->header("retry-after"), response->body);
      classified.error = out.error;
      co_return classified;
    }
    out.outcome = send_outcome::failed;
    co_return out;
  }
  co_return out;
}

} // namespace troupe::net::channel
