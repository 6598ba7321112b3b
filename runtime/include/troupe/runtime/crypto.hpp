#pragma once

/// \file
/// The little cryptography the API needs: SHA-256, HMAC-SHA256, random bytes from the
/// kernel's CSPRNG, hex and a constant-time comparison. SHA-256 is implemented here
/// (FIPS 180-4) so that the runtime layer links no crypto library.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "troupe/runtime/error.hpp"

namespace troupe {

/// A SHA-256 digest.
using sha256_digest = std::array<std::uint8_t, 32>;

/// Incremental SHA-256, for data that arrives in pieces.
class sha256_hasher {
public:
  sha256_hasher() noexcept;
  void update(std::string_view bytes) noexcept;
  /// The digest; the hasher must not be updated afterwards.
  sha256_digest finish() noexcept;

private:
  void block(const std::uint8_t* p) noexcept;
  std::array<std::uint32_t, 8> h_;
  std::array<std::uint8_t, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t length_ = 0;
};

/// SHA-256 of `bytes`.
sha256_digest sha256(std::string_view bytes) noexcept;
/// SHA-256 of `bytes` as 64 lower-case hex digits.
std::string sha256_hex(std::string_view bytes);
/// HMAC-SHA256 (RFC 2104) of `message` under `key`.
sha256_digest hmac_sha256(std::string_view key, std::string_view message) noexcept;

/// Lower-case hex of `bytes`.
std::string to_hex(std::string_view bytes);
std::string to_hex(const sha256_digest& digest);

/// `n` bytes from the kernel's CSPRNG (getrandom); fails only if the kernel does.
expected<std::string> random_bytes(std::size_t n);

/// A random (version 4) UUID in its canonical 36-character form, from `random_bytes`.
std::string new_uuid();

/// Compares in time that depends only on the lengths, not on where the inputs differ.
bool constant_time_equal(std::string_view a, std::string_view b) noexcept;

} // namespace troupe
