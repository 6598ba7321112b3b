#pragma once

/// \file
/// What WeCom (企业微信) self-built app callbacks and WeChat Official Account callbacks
/// share: the SHA-1 request signature, the message encryption scheme both use
/// ("WXBizMsgCrypt"), and the fields of an XML message. Pure functions; no I/O.
///
/// The signature is the SHA-1 hex of the sorted concatenation of the callback token, the
/// timestamp, the nonce and, for an encrypted message, the ciphertext (WeCom's and
/// encrypted WeChat's `msg_signature`); plain WeChat's `signature` leaves the ciphertext
/// out. The cipher: the 43-character EncodingAESKey plus "=" is base64 of a 32-byte
/// AES-256 key, the IV is its first 16 bytes, CBC mode, PKCS#7 padding to 32-byte
/// blocks; the plaintext is 16 random bytes, the message's length as 4 big-endian bytes,
/// the message, and the receive id (WeCom's corp id, the Official Account's app id),
/// checked on decryption.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/runtime/error.hpp"

namespace troupe::net::wechat {

/// The SHA-1 signature of the sorted `parts` (token, timestamp, nonce[, ciphertext]).
std::string signature(std::vector<std::string_view> parts);

/// Whether `given` is the signature of `parts`, compared in constant time.
bool signature_matches(std::vector<std::string_view> parts, std::string_view given);

/// The AES key of an EncodingAESKey, and the message encryption around it.
class cipher {
public:
  /// The key from a 43-character EncodingAESKey; invalid_argument otherwise.
  static expected<cipher> from_encoding_aes_key(std::string_view encoding_aes_key);

  /// The message inside `ciphertext_base64`, whose receive id must be `receive_id`; an
  /// invalid_argument for bad base64, a bad length or padding, or another receive id.
  expected<std::string> decrypt(std::string_view ciphertext_base64,
                                std::string_view receive_id) const;
  /// `message` encrypted for `receive_id`, base64, with the 16 leading bytes `random16`
  /// (fresh random bytes when empty).
  expected<std::string> encrypt(std::string_view message, std::string_view receive_id,
                                std::string_view random16 = {}) const;

private:
  std::string key_;
};

/// The fields of one inbound XML message that a channel reads.
struct message {
  std::string to_user;
  std::string from_user;
  std::int64_t create_time = 0;
  /// "text", "image", "event", …
  std::string msg_type;
  std::string content;
  std::string msg_id;
  /// WeCom: the app's AgentID.
  std::string agent_id;
  /// Events: their name (subscribe, enter_agent, …).
  std::string event;
};

/// The message of a (decrypted) XML body; an invalid_argument for malformed or hostile
/// XML or a body without `MsgType`.
expected<message> decode_message(std::string_view xml);

/// The `<Encrypt>` field of an encrypted callback body (WeCom's always are).
expected<std::string> encrypted_field(std::string_view xml);

/// An encrypted callback body as the platform posts it (what the fakes send): `<xml>`
/// with `ToUserName` (when not empty), `Encrypt` and `AgentID` (when not empty).
std::string encode_encrypted_body(std::string_view to_user, std::string_view encrypt,
                                  std::string_view agent_id);

/// A text message's XML as the platform sends it (the fakes' message bodies).
std::string encode_text_message(const message& m);

/// WeChat's and WeCom's text limit: 2,048 bytes of UTF-8.
inline constexpr std::size_t text_limit_bytes = 2048;

} // namespace troupe::net::wechat
