#pragma once

/// \file
/// Secrets at rest: the data directory's key file and authenticated encryption of the
/// values troupe must store but never show (provider API keys set over the API).
///
/// The key file is `<data_dir>/secret.key`: 32 random bytes, created with mode 0600 at
/// the first start. A file that others may read or write, that is not a regular file,
/// or whose size is not 32 bytes is refused with an error naming the file and the fix.
///
/// A sealed value is text: `v1:` followed by base64(nonce ‖ ciphertext ‖ tag), AES-256-GCM
/// with a random 96-bit nonce per value. The prefix versions the format, so a later
/// algorithm can read old values and re-seal them.

#include <array>
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include "troupe/runtime/error.hpp"

namespace troupe::storage {

/// The key file inside a data directory: `<data_dir>/secret.key`.
std::filesystem::path secret_key_path(const std::filesystem::path& data_dir);

/// Seals and opens secrets with the data directory's key. Move-only; the key bytes are
/// wiped when the box is destroyed.
class secret_box {
public:
  /// Bytes of the key file (AES-256).
  static constexpr std::size_t key_size = 32;
  /// The prefix of every value sealed in the current format.
  static constexpr std::string_view prefix = "v1:";

  /// Loads `<data_dir>/secret.key`, creating it (32 random bytes, mode 0600) when it
  /// does not exist. Fails with `permission_denied` when the file is readable or
  /// writable by group or others or is not owned by this user; with `invalid_argument`
  /// when it is not a regular file or not exactly 32 bytes; with `io_error` when it
  /// cannot be read or written.
  static expected<secret_box> load_or_create(const std::filesystem::path& data_dir);

  /// A box over `key` (exactly `key_size` bytes), for tests and tools.
  static expected<secret_box> from_key(std::string_view key);

  secret_box(secret_box&& other) noexcept;
  secret_box& operator=(secret_box&& other) noexcept;
  secret_box(const secret_box&) = delete;
  secret_box& operator=(const secret_box&) = delete;
  ~secret_box();

  /// `plaintext` sealed as `v1:…` text under a fresh random nonce (two seals of the same
  /// value differ). Fails only when the system's random source or OpenSSL does.
  expected<std::string> seal(std::string_view plaintext) const;

  /// The plaintext of a value `seal` produced with this key. Fails with
  /// `invalid_argument` on an unknown format or bad base64, and on a value that does not
  /// authenticate: changed, truncated, or sealed under another key.
  expected<std::string> open(std::string_view sealed) const;

  /// Whether `stored` is in a sealed format this build reads (starts with `v1:`).
  static bool is_sealed(std::string_view stored) noexcept;

private:
  secret_box() = default;
  std::array<unsigned char, key_size> key_{};
};

/// The key a provider row holds, ready for a request: a sealed value opened with `box`
/// (an error when `box` is null or the value does not open); a value without the `v1:`
/// prefix — plain text written before keys were sealed, which the next start seals
/// (`seal_plaintext_provider_keys`) — as it is.
expected<std::string> reveal_secret(std::string_view stored, const secret_box* box);

} // namespace troupe::storage
