#include "troupe/net/channel/feishu_wire.hpp"

#include <cctype>
#include <charconv>

#include "platform_wire.hpp"
#include "troupe/runtime/base64.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::net::feishu {

namespace {

using namespace channel_json;

std::string digest_key(std::string_view encrypt_key) {
  const auto d = sha256(encrypt_key);
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

std::optional<std::chrono::seconds> seconds_of(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())) != 0) {
    text.remove_prefix(1);
  }
  std::int64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc{} || n < 0 || n > 86'400) {
    return std::nullopt;
  }
  return std::chrono::seconds(n);
}

} // namespace

std::string sign(std::string_view timestamp, std::string_view nonce, std::string_view encrypt_key,
                 std::string_view body) {
  sha256_hasher h;
  h.update(timestamp);
  h.update(nonce);
  h.update(encrypt_key);
  h.update(body);
  return to_hex(h.finish());
}

bool verify_signature(std::string_view timestamp, std::string_view nonce,
                      std::string_view encrypt_key, std::string_view body,
                      std::string_view signature) {
  if (timestamp.empty() || signature.empty()) {
    return false;
  }
  return constant_time_equal(sign(timestamp, nonce, encrypt_key, body), signature);
}

expected<std::string> decrypt(std::string_view encrypt_key, std::string_view encrypted) {
  auto raw = base64_decode(encrypted);
  if (!raw) {
    return fail(errc::parse_error, "encrypt: is not base64");
  }
  constexpr std::size_t iv_size = 16;
  if (raw->size() <= iv_size) {
    return fail(errc::parse_error, "encrypt: too short for an iv and a block");
  }
  auto plain =
      aes_256_cbc_pkcs7_decrypt(digest_key(encrypt_key), std::string_view(*raw).substr(0, iv_size),
                                std::string_view(*raw).substr(iv_size));
  if (!plain) {
    return fail(errc::parse_error, "encrypt: " + plain.error().message);
  }
  return plain;
}

std::string encrypt(std::string_view encrypt_key, std::string_view iv, std::string_view plain) {
  auto sealed = aes_256_cbc_pkcs7_encrypt(digest_key(encrypt_key), iv, plain);
  return base64_encode(std::string(iv) + sealed.value_or(""));
}

expected<std::optional<std::string>> encrypted_member(std::string_view body) {
  auto doc = document::parse_object(body, "Feishu callback");
  if (!doc) {
    return tl::unexpected(doc.error());
  }
  if (auto e = string_member(doc->root(), "encrypt")) {
    return std::optional<std::string>(std::string(*e));
  }
  return std::optional<std::string>();
}

std::string strip_mentions(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  constexpr std::string_view key = "@_user_";
  std::size_t i = 0;
  while (i < text.size()) {
    if (text.substr(i, key.size()) == key) {
      auto j = i + key.size();
      while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j])) != 0) {
        ++j;
      }
      if (j > i + key.size()) {
        i = j;
        continue;
      }
    }
    out.push_back(text[i]);
    ++i;
  }
  const auto first = out.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) {
    return {};
  }
  const auto last = out.find_last_not_of(" \t\r\n");
  // Mentions leave doubled spaces behind ("hi @_user_1 there").
  std::string collapsed;
  for (std::size_t k = first; k <= last; ++k) {
    if (out[k] == ' ' && !collapsed.empty() && collapsed.back() == ' ') {
      continue;
    }
    collapsed.push_back(out[k]);
  }
  return collapsed;
}

expected<event> decode_event(std::string_view body) {
  auto doc = document::parse_object(body, "Feishu event");
  if (!doc) {
    return tl::unexpected(doc.error());
  }
  event out;
  const auto root = doc->root();
  if (text_member(root, "type") == "url_verification") {
    out.type = event::kind::url_verification;
    out.challenge = text_member(root, "challenge");
    out.token = text_member(root, "token");
    if (out.challenge.empty()) {
      return fail(errc::parse_error, "Feishu url_verification: no challenge");
    }
    return out;
  }
  const auto header = object_member(root, "header");
  if (!header) {
    // A v1 event (schema 1.0: `uuid`, `event.type`): not subscribed by troupe.
    out.token = text_member(root, "token");
    return out;
  }
  out.token = text_member(*header, "token");
  out.event_id = text_member(*header, "event_id");
  out.event_type = text_member(*header, "event_type");
  if (out.event_type != "im.message.receive_v1") {
    return out;
  }
  const auto ev = object_member(root, "event");
  const auto message = ev ? object_member(*ev, "message") : std::nullopt;
  if (!message) {
    return fail(errc::parse_error, "Feishu im.message.receive_v1: no event.message");
  }
  out.message_id = text_member(*message, "message_id");
  out.chat_id = text_member(*message, "chat_id");
  out.chat_type = text_member(*message, "chat_type");
  out.root_id = text_member(*message, "root_id");
  out.thread_id = text_member(*message, "thread_id");
  out.message_type = text_member(*message, "message_type");
  if (out.message_id.empty() || out.chat_id.empty()) {
    return fail(errc::parse_error, "Feishu im.message.receive_v1: no message_id or chat_id");
  }
  if (const auto sender = object_member(*ev, "sender")) {
    out.sender_type = text_member(*sender, "sender_type");
    if (const auto id = object_member(*sender, "sender_id")) {
      out.sender = text_member(*id, "open_id");
    }
  }
  out.type = event::kind::message;
  if (out.message_type == "text") {
    auto content = document::parse_object(text_member(*message, "content"), "Feishu content");
    if (!content) {
      return tl::unexpected(content.error());
    }
    out.text = strip_mentions(text_member(content->root(), "text"));
  }
  return out;
}

std::string encode_challenge_answer(std::string_view challenge) {
  json_writer w;
  w.begin_object().key("challenge").value(challenge).end_object();
  return std::move(w).str();
}

std::string encode_reply(std::string_view text, std::string_view uuid) {
  json_writer content;
  content.begin_object().key("text").value(text).end_object();
  json_writer w;
  w.begin_object().key("msg_type").value("text").key("content").value(content.str());
  if (!uuid.empty()) {
    w.key("uuid").value(uuid.substr(0, 50));
  }
  w.end_object();
  return std::move(w).str();
}

std::string encode_token_request(std::string_view app_id, std::string_view app_secret) {
  json_writer w;
  w.begin_object().key("app_id").value(app_id).key("app_secret").value(app_secret).end_object();
  return std::move(w).str();
}

answer classify_answer(unsigned http_status, std::string_view retry_after_header,
                       std::string_view ratelimit_reset_header, std::string_view body) {
  answer out;
  out.http_status = http_status;
  out.retry_after = seconds_of(retry_after_header);
  if (!out.retry_after) {
    out.retry_after = seconds_of(ratelimit_reset_header);
  }
  auto doc = document::parse_object(body, "Feishu answer");
  if (!doc) {
    out.msg = excerpt(body);
    return out;
  }
  const auto root = doc->root();
  out.code = int_member(root, "code").value_or(-1);
  out.msg = text_member(root, "msg");
  out.token = text_member(root, "tenant_access_token");
  out.expire = int_member(root, "expire").value_or(0);
  if (const auto data = object_member(root, "data")) {
    out.message_id = text_member(*data, "message_id");
  }
  return out;
}

} // namespace troupe::net::feishu
