#pragma once

/// \file
/// The little cryptography the API needs: SHA-256, HMAC-SHA256, SHA-1 (platform
/// signatures that still use it: WeChat, WeCom), AES-256-CBC without padding (WeChat's
/// and WeCom's encrypted callbacks, which pad on their own) and with PKCS#7 (Feishu's),
/// random bytes, hex and a
/// constant-time comparison. The primitives are OpenSSL's libcrypto (linked privately:
/// no OpenSSL header is included here); this header only gives them troupe's types.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "troupe/runtime/error.hpp"

// OpenSSL's EVP_MD_CTX, declared so that the hasher can own one without this header
// including OpenSSL.
struct evp_md_ctx_st;

namespace troupe {

/// A SHA-256 digest.
using sha256_digest = std::array<std::uint8_t, 32>;

/// Incremental SHA-256, for data that arrives in pieces. Movable, not copyable.
/// Aborts the process if libcrypto cannot allocate or initialise its digest context (out
/// of memory or a broken OpenSSL install: nothing a caller could recover from).
class sha256_hasher {
public:
  sha256_hasher() noexcept;
  void update(std::string_view bytes) noexcept;
  /// The digest; the hasher must not be updated afterwards.
  sha256_digest finish() noexcept;

private:
  struct context_deleter {
    void operator()(evp_md_ctx_st* ctx) const noexcept;
  };
  std::unique_ptr<evp_md_ctx_st, context_deleter> ctx_;
};

/// SHA-256 of `bytes`.
sha256_digest sha256(std::string_view bytes) noexcept;
/// SHA-256 of `bytes` as 64 lower-case hex digits.
std::string sha256_hex(std::string_view bytes);
/// HMAC-SHA256 (RFC 2104) of `message` under `key`.
sha256_digest hmac_sha256(std::string_view key, std::string_view message) noexcept;

/// SHA-1 of `bytes` as 40 lower-case hex digits. Only for platforms whose signatures
/// are defined with it (WeChat's and WeCom's `signature` / `msg_signature`): never for
/// anything troupe chooses itself.
std::string sha1_hex(std::string_view bytes);

/// AES-256-CBC of `bytes` under the 32-byte `key` and 16-byte `iv`, without padding:
/// `bytes` must be a whole number of 16-byte blocks (the caller pads, as WeChat's PKCS#7
/// to 32 bytes). An invalid_argument for a wrong key, iv or length.
expected<std::string> aes_256_cbc_encrypt(std::string_view key, std::string_view iv,
                                          std::string_view bytes);
/// The inverse of `aes_256_cbc_encrypt` (no padding removed).
expected<std::string> aes_256_cbc_decrypt(std::string_view key, std::string_view iv,
                                          std::string_view bytes);
/// AES-256-CBC with PKCS#7 padding (what Feishu's encrypted events use): `data` under the
/// 32-byte `key` and 16-byte `iv`. Decrypting fails (`invalid_argument`) on a wrong key
/// or iv size, a length that is not a whole number of blocks, or bad padding (a wrong
/// key, or bytes that were not encrypted so).
expected<std::string> aes_256_cbc_pkcs7_decrypt(std::string_view key, std::string_view iv,
                                                std::string_view data);
expected<std::string> aes_256_cbc_pkcs7_encrypt(std::string_view key, std::string_view iv,
                                                std::string_view data);

/// Lower-case hex of `bytes`.
std::string to_hex(std::string_view bytes);
std::string to_hex(const sha256_digest& digest);

/// `n` bytes from OpenSSL's CSPRNG (seeded by the kernel); an io_error naming OpenSSL's
/// reason when it cannot produce them (e.g. no entropy source).
expected<std::string> random_bytes(std::size_t n);

/// A random (version 4) UUID in its canonical 36-character form, from `random_bytes`.
/// Fails loudly: when no randomness is available it logs the cause and aborts, because
/// an all-zero or predictable id (ids name runs, files and conversations, which must
/// neither collide nor be guessed) is a security bug, not a degraded mode.
std::string new_uuid();

/// Compares in time that depends only on the lengths, not on where the inputs differ.
bool constant_time_equal(std::string_view a, std::string_view b) noexcept;

} // namespace troupe
