#include "troupe/storage/secret_box.hpp"

// Why OpenSSL's AES-256-GCM (EVP) and not libsodium's secretbox: the process already
// loads OpenSSL (libcurl is built on it, and the runtime's crypto helpers use it), so
// sealing adds no library; AES-GCM is an AEAD as strong as XSalsa20-Poly1305 here and
// runs on AES-NI. Its one trap, nonce reuse, is avoided with a random 96-bit nonce per
// value: safe far beyond the few keys an admin ever sets under one key file.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "troupe/runtime/base64.hpp"
#include "troupe/runtime/crypto.hpp"

namespace troupe::storage {

namespace {

constexpr std::size_t nonce_size = 12;
constexpr std::size_t tag_size = 16;
// Far above any API key; keeps every length an int for OpenSSL.
constexpr std::size_t max_plaintext = 1 << 20;
// Authenticated with every value: a value sealed for another purpose or format version
// does not open as this one.
constexpr std::string_view associated_data = "troupe secret v1";

struct cipher_ctx_deleter {
  void operator()(EVP_CIPHER_CTX* ctx) const noexcept {
    EVP_CIPHER_CTX_free(ctx);
  }
};
using cipher_ctx = std::unique_ptr<EVP_CIPHER_CTX, cipher_ctx_deleter>;

const unsigned char* bytes_of(std::string_view s) noexcept {
  return reinterpret_cast<const unsigned char*>(s.data());
}

error crypto_failure(std::string_view what) {
  return error{errc::io_error, fmt::format("secret box: OpenSSL failed to {}", what)};
}

// Closes a file descriptor when it goes out of scope.
struct fd_guard {
  int fd = -1;
  ~fd_guard() {
    if (fd >= 0) {
      ::close(fd);
    }
  }
};

expected<void> write_all(int fd, std::string_view bytes, const std::filesystem::path& path) {
  while (!bytes.empty()) {
    const auto n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return fail(errc::io_error,
                  fmt::format("cannot write '{}': {}", path.string(), std::strerror(errno)));
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

// Creates the key file exclusively; `exists` is set when another file is already there.
expected<std::string> create_key_file(const std::filesystem::path& path, bool& exists) {
  exists = false;
  fd_guard f{::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)};
  if (f.fd < 0) {
    if (errno == EEXIST) {
      exists = true;
      return std::string{};
    }
    return fail(errc::io_error,
                fmt::format("cannot create '{}': {}", path.string(), std::strerror(errno)));
  }
  auto key = random_bytes(secret_box::key_size);
  if (!key) {
    ::unlink(path.c_str());
    return tl::unexpected(key.error());
  }
  // The umask can only narrow 0600; fchmod states the intent whatever it is.
  expected<void> written;
  if (::fchmod(f.fd, 0600) != 0) {
    written = fail(errc::io_error,
                   fmt::format("cannot chmod '{}': {}", path.string(), std::strerror(errno)));
  }
  if (written) {
    written = write_all(f.fd, *key, path);
  }
  if (written && ::fsync(f.fd) != 0) {
    written = fail(errc::io_error,
                   fmt::format("cannot sync '{}': {}", path.string(), std::strerror(errno)));
  }
  if (!written) {
    // No half-written key file is left for the next start to refuse.
    ::unlink(path.c_str());
    OPENSSL_cleanse(key->data(), key->size());
    return tl::unexpected(written.error());
  }
  return key;
}

expected<std::string> read_key_file(const std::filesystem::path& path) {
  fd_guard f{::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)};
  if (f.fd < 0) {
    if (errno == ELOOP) {
      return fail(errc::invalid_argument,
                  fmt::format("'{}' is a symbolic link; the key file must be a regular file",
                              path.string()));
    }
    return fail(errc::io_error,
                fmt::format("cannot open '{}': {}", path.string(), std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) {
    return fail(errc::io_error,
                fmt::format("cannot stat '{}': {}", path.string(), std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return fail(errc::invalid_argument,
                fmt::format("'{}' is not a regular file; remove it and troupe creates a new key "
                            "(keys sealed with the old one are then lost)",
                            path.string()));
  }
  if ((st.st_mode & 077) != 0) {
    return fail(errc::permission_denied,
                fmt::format("'{}' has mode {:04o}: the key file must be readable by its owner "
                            "only (chmod 600 '{}')",
                            path.string(), st.st_mode & 07777, path.string()));
  }
  if (st.st_uid != ::geteuid()) {
    return fail(errc::permission_denied,
                fmt::format("'{}' is owned by uid {}, not by this user (uid {})", path.string(),
                            st.st_uid, ::geteuid()));
  }
  if (st.st_size != static_cast<off_t>(secret_box::key_size)) {
    return fail(errc::invalid_argument,
                fmt::format("'{}' is {} bytes; a key file is exactly {} bytes (a damaged or "
                            "foreign file: restore it from a backup)",
                            path.string(), st.st_size, secret_box::key_size));
  }
  std::string key(secret_box::key_size, '\0');
  std::size_t got = 0;
  while (got < key.size()) {
    const auto n = ::read(f.fd, key.data() + got, key.size() - got);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      OPENSSL_cleanse(key.data(), key.size());
      return fail(errc::io_error, fmt::format("cannot read '{}': {}", path.string(),
                                              n < 0 ? std::strerror(errno) : "file shrank"));
    }
    got += static_cast<std::size_t>(n);
  }
  return key;
}

} // namespace

std::filesystem::path secret_key_path(const std::filesystem::path& data_dir) {
  return data_dir / "secret.key";
}

expected<secret_box> secret_box::load_or_create(const std::filesystem::path& data_dir) {
  const auto path = secret_key_path(data_dir);
  bool exists = false;
  auto key = create_key_file(path, exists);
  if (key && exists) {
    key = read_key_file(path);
  }
  if (!key) {
    return tl::unexpected(key.error());
  }
  auto box = from_key(*key);
  OPENSSL_cleanse(key->data(), key->size());
  return box;
}

expected<secret_box> secret_box::from_key(std::string_view key) {
  if (key.size() != key_size) {
    return fail(errc::invalid_argument,
                fmt::format("a secret key is {} bytes, not {}", key_size, key.size()));
  }
  secret_box box;
  std::memcpy(box.key_.data(), key.data(), key_size);
  return box;
}

secret_box::secret_box(secret_box&& other) noexcept : key_(other.key_) {
  OPENSSL_cleanse(other.key_.data(), other.key_.size());
}

secret_box& secret_box::operator=(secret_box&& other) noexcept {
  if (this != &other) {
    key_ = other.key_;
    OPENSSL_cleanse(other.key_.data(), other.key_.size());
  }
  return *this;
}

secret_box::~secret_box() {
  OPENSSL_cleanse(key_.data(), key_.size());
}

bool secret_box::is_sealed(std::string_view stored) noexcept {
  return stored.starts_with(prefix);
}

expected<std::string> secret_box::seal(std::string_view plaintext) const {
  if (plaintext.size() > max_plaintext) {
    return fail(errc::invalid_argument, fmt::format("a secret is at most {} bytes, not {}",
                                                    max_plaintext, plaintext.size()));
  }
  auto nonce = random_bytes(nonce_size);
  if (!nonce) {
    return tl::unexpected(nonce.error());
  }
  // nonce ‖ ciphertext ‖ tag; GCM's ciphertext is as long as the plaintext.
  std::string raw(nonce_size + plaintext.size() + tag_size, '\0');
  std::memcpy(raw.data(), nonce->data(), nonce_size);
  auto* out = reinterpret_cast<unsigned char*>(raw.data());

  cipher_ctx ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), out) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &len, bytes_of(associated_data),
                        static_cast<int>(associated_data.size())) != 1 ||
      EVP_EncryptUpdate(ctx.get(), out + nonce_size, &len, bytes_of(plaintext),
                        static_cast<int>(plaintext.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), out + nonce_size + len, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(tag_size),
                          out + nonce_size + plaintext.size()) != 1) {
    return tl::unexpected(crypto_failure("seal a secret"));
  }
  return std::string(prefix) + base64_encode(raw);
}

expected<std::string> secret_box::open(std::string_view sealed) const {
  if (!is_sealed(sealed)) {
    return fail(errc::invalid_argument,
                "a sealed secret starts with 'v1:'; this value is in no format troupe knows");
  }
  auto raw = base64_decode(sealed.substr(prefix.size()));
  if (!raw) {
    return fail(errc::invalid_argument,
                fmt::format("a sealed secret is not valid base64: {}", raw.error().message));
  }
  if (raw->size() < nonce_size + tag_size || raw->size() > nonce_size + max_plaintext + tag_size) {
    return fail(errc::invalid_argument, "a sealed secret is truncated");
  }
  const auto length = raw->size() - nonce_size - tag_size;
  const auto* in = reinterpret_cast<const unsigned char*>(raw->data());
  // The tag is const in meaning; OpenSSL's control call takes a non-const pointer.
  std::array<unsigned char, tag_size> tag{};
  std::memcpy(tag.data(), in + nonce_size + length, tag_size);
  std::string plaintext(length, '\0');
  auto* out = reinterpret_cast<unsigned char*>(plaintext.data());

  cipher_ctx ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), in) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &len, bytes_of(associated_data),
                        static_cast<int>(associated_data.size())) != 1 ||
      EVP_DecryptUpdate(ctx.get(), out, &len, in + nonce_size, static_cast<int>(length)) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, static_cast<int>(tag_size),
                          tag.data()) != 1) {
    return tl::unexpected(crypto_failure("open a secret"));
  }
  if (EVP_DecryptFinal_ex(ctx.get(), out + len, &len) != 1) {
    OPENSSL_cleanse(plaintext.data(), plaintext.size());
    return fail(errc::invalid_argument,
                "a sealed secret does not authenticate: it was changed, or sealed with another "
                "secret.key");
  }
  return plaintext;
}

expected<std::string> reveal_secret(std::string_view stored, const secret_box* box) {
  if (!secret_box::is_sealed(stored)) {
    return std::string(stored);
  }
  if (box == nullptr) {
    return fail(errc::invalid_argument, "a sealed secret needs the data directory's secret.key");
  }
  return box->open(stored);
}

} // namespace troupe::storage
