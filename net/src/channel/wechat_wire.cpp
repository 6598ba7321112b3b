#include "troupe/net/channel/wechat_wire.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "troupe/net/channel/flat_xml.hpp"
#include "troupe/runtime/base64.hpp"
#include "troupe/runtime/crypto.hpp"

namespace troupe::net::wechat {

namespace {

/// WeChat pads to 32-byte blocks (PKCS#7 with k = 32), not AES's 16.
constexpr std::size_t pad_block = 32;
constexpr std::size_t random_prefix = 16;
constexpr std::size_t length_bytes = 4;

} // namespace

std::string signature(std::vector<std::string_view> parts) {
  std::sort(parts.begin(), parts.end());
  std::string joined;
  for (const auto p : parts) {
    joined += p;
  }
  return sha1_hex(joined);
}

bool signature_matches(std::vector<std::string_view> parts, std::string_view given) {
  const auto expected_signature = signature(std::move(parts));
  std::string lowered(given);
  std::transform(lowered.begin(), lowered.end(), lowered.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return constant_time_equal(expected_signature, lowered);
}

expected<cipher> cipher::from_encoding_aes_key(std::string_view encoding_aes_key) {
  constexpr std::size_t key_chars = 43;
  if (encoding_aes_key.size() != key_chars) {
    return fail(errc::invalid_argument, fmt::format("an EncodingAESKey has 43 characters, not {}",
                                                    encoding_aes_key.size()));
  }
  auto key = base64_decode(std::string(encoding_aes_key) + "=");
  if (!key || key->size() != 32) {
    return fail(errc::invalid_argument, "the EncodingAESKey is not base64 of 32 bytes");
  }
  cipher c;
  c.key_ = std::move(*key);
  return c;
}

expected<std::string> cipher::decrypt(std::string_view ciphertext_base64,
                                      std::string_view receive_id) const {
  auto raw = base64_decode(ciphertext_base64);
  if (!raw) {
    return fail(errc::invalid_argument, "the ciphertext is not base64");
  }
  if (raw->empty() || raw->size() % pad_block != 0) {
    return fail(errc::invalid_argument,
                fmt::format("the ciphertext has {} bytes, not whole 32-byte blocks", raw->size()));
  }
  auto plain = aes_256_cbc_decrypt(key_, std::string_view(key_).substr(0, 16), *raw);
  if (!plain) {
    return tl::unexpected(plain.error());
  }
  const auto pad = static_cast<unsigned char>(plain->back());
  if (pad < 1 || pad > pad_block || pad > plain->size()) {
    return fail(errc::invalid_argument, "the decrypted message has bad padding");
  }
  for (std::size_t i = plain->size() - pad; i < plain->size(); ++i) {
    if (static_cast<unsigned char>((*plain)[i]) != pad) {
      return fail(errc::invalid_argument, "the decrypted message has bad padding");
    }
  }
  plain->resize(plain->size() - pad);
  if (plain->size() < random_prefix + length_bytes) {
    return fail(errc::invalid_argument, "the decrypted message is too short");
  }
  std::size_t length = 0;
  for (std::size_t i = 0; i < length_bytes; ++i) {
    length = (length << 8) | static_cast<unsigned char>((*plain)[random_prefix + i]);
  }
  const auto start = random_prefix + length_bytes;
  if (length > plain->size() - start) {
    return fail(errc::invalid_argument, "the decrypted message's length is out of range");
  }
  const auto received_for = std::string_view(*plain).substr(start + length);
  if (!constant_time_equal(received_for, receive_id)) {
    return fail(errc::invalid_argument,
                "the decrypted message is for another receive id (corp id or app id)");
  }
  return plain->substr(start, length);
}

expected<std::string> cipher::encrypt(std::string_view message, std::string_view receive_id,
                                      std::string_view random16) const {
  std::string plain;
  if (random16.size() == random_prefix) {
    plain = std::string(random16);
  } else {
    auto fresh = random_bytes(random_prefix);
    if (!fresh) {
      return tl::unexpected(fresh.error());
    }
    plain = std::move(*fresh);
  }
  const auto n = static_cast<std::uint32_t>(message.size());
  for (int shift = 24; shift >= 0; shift -= 8) {
    plain += static_cast<char>((n >> shift) & 0xff);
  }
  plain += message;
  plain += receive_id;
  const auto pad = pad_block - plain.size() % pad_block;
  plain.append(pad, static_cast<char>(pad));
  auto sealed = aes_256_cbc_encrypt(key_, std::string_view(key_).substr(0, 16), plain);
  if (!sealed) {
    return tl::unexpected(sealed.error());
  }
  return base64_encode(*sealed);
}

expected<message> decode_message(std::string_view xml) {
  auto fields = channel::parse_flat_xml(xml);
  if (!fields) {
    return tl::unexpected(fields.error());
  }
  message m;
  m.msg_type = fields->text("MsgType");
  if (m.msg_type.empty()) {
    return fail(errc::invalid_argument, "the XML message has no MsgType");
  }
  m.to_user = fields->text("ToUserName");
  m.from_user = fields->text("FromUserName");
  m.content = fields->text("Content");
  m.msg_id = fields->text("MsgId");
  m.agent_id = fields->text("AgentID");
  m.event = fields->text("Event");
  const auto created = fields->text("CreateTime");
  std::int64_t t = 0;
  for (const char c : created) {
    if (c < '0' || c > '9' || t > (INT64_MAX - 9) / 10) {
      t = 0;
      break;
    }
    t = t * 10 + (c - '0');
  }
  m.create_time = t;
  return m;
}

expected<std::string> encrypted_field(std::string_view xml) {
  auto fields = channel::parse_flat_xml(xml);
  if (!fields) {
    return tl::unexpected(fields.error());
  }
  auto encrypt = fields->field("Encrypt");
  if (!encrypt || encrypt->empty()) {
    return fail(errc::invalid_argument, "the XML body has no Encrypt field");
  }
  return std::string(*encrypt);
}

std::string encode_encrypted_body(std::string_view to_user, std::string_view encrypt,
                                  std::string_view agent_id) {
  std::string out = "<xml>";
  if (!to_user.empty()) {
    out += fmt::format("<ToUserName><![CDATA[{}]]></ToUserName>", to_user);
  }
  out += fmt::format("<Encrypt><![CDATA[{}]]></Encrypt>", encrypt);
  if (!agent_id.empty()) {
    out += fmt::format("<AgentID><![CDATA[{}]]></AgentID>", agent_id);
  }
  out += "</xml>";
  return out;
}

std::string encode_text_message(const message& m) {
  std::string out = fmt::format(
      "<xml><ToUserName><![CDATA[{}]]></ToUserName><FromUserName><![CDATA[{}]]></FromUserName>"
      "<CreateTime>{}</CreateTime><MsgType><![CDATA[{}]]></MsgType>"
      "<Content>{}</Content><MsgId>{}</MsgId>",
      m.to_user, m.from_user, m.create_time, m.msg_type, channel::xml_escape(m.content), m.msg_id);
  if (!m.agent_id.empty()) {
    out += fmt::format("<AgentID>{}</AgentID>", m.agent_id);
  }
  out += "</xml>";
  return out;
}

} // namespace troupe::net::wechat
