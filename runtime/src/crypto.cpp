#include "troupe/runtime/crypto.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "troupe/runtime/log.hpp"

namespace troupe {

namespace {

/// OpenSSL's reason for the most recent failure on this thread, or a generic phrase when
/// its error queue is empty. Clears the queue.
std::string openssl_reason() {
  const auto code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) {
    return "no reason given by OpenSSL";
  }
  std::array<char, 256> text{};
  ERR_error_string_n(code, text.data(), text.size());
  return text.data();
}

/// Ends the process for a libcrypto failure that leaves nothing to recover: a digest
/// context that cannot be allocated or initialised.
[[noreturn]] void crypto_failure(std::string_view what) noexcept {
  log::write(log::level::error, fmt::format("{} failed: {}", what, openssl_reason()));
  std::abort();
}

/// libcrypto takes lengths as int or size_t by function; pieces of this size fit both.
constexpr std::size_t max_piece = std::size_t{1} << 30;

} // namespace

void sha256_hasher::context_deleter::operator()(evp_md_ctx_st* ctx) const noexcept {
  EVP_MD_CTX_free(ctx);
}

sha256_hasher::sha256_hasher() noexcept : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) {
    crypto_failure("initialising SHA-256");
  }
}

void sha256_hasher::update(std::string_view bytes) noexcept {
  while (!bytes.empty()) {
    const auto piece = bytes.substr(0, max_piece);
    if (EVP_DigestUpdate(ctx_.get(), piece.data(), piece.size()) != 1) {
      crypto_failure("SHA-256 update");
    }
    bytes.remove_prefix(piece.size());
  }
}

sha256_digest sha256_hasher::finish() noexcept {
  sha256_digest out{};
  unsigned int size = 0;
  if (EVP_DigestFinal_ex(ctx_.get(), out.data(), &size) != 1 || size != out.size()) {
    crypto_failure("SHA-256 final");
  }
  return out;
}

sha256_digest sha256(std::string_view bytes) noexcept {
  sha256_hasher h;
  h.update(bytes);
  return h.finish();
}

std::string sha256_hex(std::string_view bytes) {
  return to_hex(sha256(bytes));
}

sha256_digest hmac_sha256(std::string_view key, std::string_view message) noexcept {
  sha256_digest out{};
  unsigned int size = 0;
  // HMAC() takes the key length as an int: a longer key is hashed first by RFC 2104
  // anyway, so hashing it here gives the same MAC.
  const auto hashed_key = key.size() > max_piece ? sha256(key) : sha256_digest{};
  const auto* key_data = key.size() > max_piece ? static_cast<const void*>(hashed_key.data())
                                                : static_cast<const void*>(key.data());
  const auto key_size = key.size() > max_piece ? hashed_key.size() : key.size();
  if (HMAC(EVP_sha256(), key_data, static_cast<int>(key_size),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), out.data(),
           &size) == nullptr ||
      size != out.size()) {
    crypto_failure("HMAC-SHA256");
  }
  return out;
}

std::string sha1_hex(std::string_view bytes) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> out{};
  unsigned int size = 0;
  if (bytes.size() > max_piece ||
      EVP_Digest(bytes.data(), bytes.size(), out.data(), &size, EVP_sha1(), nullptr) != 1) {
    crypto_failure("SHA-1");
  }
  return to_hex(std::string_view(reinterpret_cast<const char*>(out.data()), size));
}

namespace {

struct cipher_deleter {
  void operator()(EVP_CIPHER_CTX* ctx) const noexcept {
    EVP_CIPHER_CTX_free(ctx);
  }
};

/// One AES-256-CBC pass, `encrypt` or decrypt, with PKCS#7 padding (`pkcs7`) or none (the
/// input then whole 16-byte blocks: WeChat pads on its own, to 32 bytes).
expected<std::string> aes_256_cbc(std::string_view key, std::string_view iv, std::string_view bytes,
                                  bool encrypt, bool pkcs7) {
  constexpr std::size_t block = 16;
  if (key.size() != 32 || iv.size() != block) {
    return fail(errc::invalid_argument, "AES-256-CBC needs a 32-byte key and a 16-byte iv");
  }
  if ((!encrypt || !pkcs7) && (bytes.size() % block != 0 || (pkcs7 && bytes.empty()))) {
    return fail(
        errc::invalid_argument,
        fmt::format("AES-256-CBC input of {} bytes is not whole 16-byte blocks", bytes.size()));
  }
  if (bytes.size() > max_piece) {
    return fail(errc::invalid_argument, "too many bytes for one AES call");
  }
  std::unique_ptr<EVP_CIPHER_CTX, cipher_deleter> ctx(EVP_CIPHER_CTX_new());
  if (!ctx) {
    crypto_failure("EVP_CIPHER_CTX_new");
  }
  const auto* k = reinterpret_cast<const unsigned char*>(key.data());
  const auto* v = reinterpret_cast<const unsigned char*>(iv.data());
  if (EVP_CipherInit_ex(ctx.get(), EVP_aes_256_cbc(), nullptr, k, v, encrypt ? 1 : 0) != 1 ||
      EVP_CIPHER_CTX_set_padding(ctx.get(), pkcs7 ? 1 : 0) != 1) {
    return fail(errc::internal, "AES-256-CBC setup failed: " + openssl_reason());
  }
  std::string out(bytes.size() + block, '\0');
  int written = 0;
  int last = 0;
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  if (EVP_CipherUpdate(ctx.get(), o, &written, reinterpret_cast<const unsigned char*>(bytes.data()),
                       static_cast<int>(bytes.size())) != 1 ||
      EVP_CipherFinal_ex(ctx.get(), o + written, &last) != 1) {
    ERR_clear_error();
    return fail(errc::invalid_argument, encrypt ? "AES-256-CBC encryption failed"
                                        : pkcs7 ? "AES-256-CBC: bad padding (a wrong key?)"
                                                : "AES-256-CBC decryption failed");
  }
  out.resize(static_cast<std::size_t>(written) + static_cast<std::size_t>(last));
  return out;
}

} // namespace

expected<std::string> aes_256_cbc_encrypt(std::string_view key, std::string_view iv,
                                          std::string_view bytes) {
  return aes_256_cbc(key, iv, bytes, true, false);
}

expected<std::string> aes_256_cbc_decrypt(std::string_view key, std::string_view iv,
                                          std::string_view bytes) {
  return aes_256_cbc(key, iv, bytes, false, false);
}

expected<std::string> aes_256_cbc_pkcs7_decrypt(std::string_view key, std::string_view iv,
                                                std::string_view data) {
  return aes_256_cbc(key, iv, data, false, true);
}

expected<std::string> aes_256_cbc_pkcs7_encrypt(std::string_view key, std::string_view iv,
                                                std::string_view data) {
  return aes_256_cbc(key, iv, data, true, true);
}

std::string to_hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char ch : bytes) {
    const auto b = static_cast<unsigned char>(ch);
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 0x0f]);
  }
  return out;
}

std::string to_hex(const sha256_digest& digest) {
  return to_hex(std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
}

expected<std::string> random_bytes(std::size_t n) {
  std::string out(n, '\0');
  auto* p = reinterpret_cast<unsigned char*>(out.data());
  for (std::size_t filled = 0; filled < n;) {
    const auto piece = std::min(n - filled, max_piece);
    if (RAND_bytes(p + filled, static_cast<int>(piece)) != 1) {
      return fail(errc::io_error, "no random bytes available: " + openssl_reason());
    }
    filled += piece;
  }
  return out;
}

bool constant_time_equal(std::string_view a, std::string_view b) noexcept {
  // Only the contents are secret; the length is compared openly, as before.
  if (a.size() != b.size()) {
    return false;
  }
  return a.empty() || CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string new_uuid() {
  auto bytes = random_bytes(16);
  if (!bytes) {
    log::write(log::level::error,
               fmt::format("cannot make a UUID, aborting rather than issue a predictable id: {}",
                           bytes.error().message));
    std::abort();
  }
  auto& b = *bytes;
  b[6] = static_cast<char>((b[6] & 0x0f) | 0x40); // version 4
  b[8] = static_cast<char>((b[8] & 0x3f) | 0x80); // RFC 4122 variant
  const auto hex = to_hex(b);
  return fmt::format("{}-{}-{}-{}-{}", hex.substr(0, 8), hex.substr(8, 4), hex.substr(12, 4),
                     hex.substr(16, 4), hex.substr(20));
}

} // namespace troupe
