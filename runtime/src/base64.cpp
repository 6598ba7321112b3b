#include "troupe/runtime/base64.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <openssl/evp.h>

namespace troupe {

namespace {

/// Input bytes per EVP_EncodeBlock call: a multiple of 3 (so only the last call pads)
/// that keeps lengths well inside the int the function takes.
constexpr std::size_t encode_piece = 3 * 16 * 1024;
/// Base64 characters per EVP_DecodeBlock call: a multiple of 4, for the same reasons.
constexpr std::size_t decode_piece = 4 * 16 * 1024;

constexpr bool is_space(char c) noexcept {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

constexpr bool is_alphabet(char c) noexcept {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
         c == '/';
}

} // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out((bytes.size() + 2) / 3 * 4, '\0');
  auto* dst = reinterpret_cast<unsigned char*>(out.data());
  const auto* src = reinterpret_cast<const unsigned char*>(bytes.data());
  for (std::size_t done = 0; done < bytes.size();) {
    const auto piece = std::min(encode_piece, bytes.size() - done);
    const int written = EVP_EncodeBlock(dst, src + done, static_cast<int>(piece));
    dst += written;
    done += piece;
  }
  return out;
}

expected<std::string> base64_decode(std::string_view text) {
  // EVP_DecodeBlock wants whole, padded quanta and no inner whitespace; this API accepts
  // whitespace anywhere and optional padding. So first gather the alphabet characters,
  // checking each (with its offset for the error) and that '=' only ends the text.
  std::string compact;
  compact.reserve(text.size());
  std::size_t first_padding = std::string_view::npos;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (is_space(c)) {
      continue;
    }
    if (c == '=') {
      first_padding = std::min(first_padding, i);
      continue;
    }
    if (!is_alphabet(c) || first_padding != std::string_view::npos) {
      return fail(errc::invalid_argument, fmt::format("invalid base64 character at offset {}", i));
    }
    compact.push_back(c);
  }
  // A lone character in the last quantum carries 6 bits, less than one byte.
  if (compact.size() % 4 == 1) {
    return fail(errc::invalid_argument,
                fmt::format("truncated base64: {} characters leave 6 bits over", compact.size()));
  }
  const auto padding = (4 - compact.size() % 4) % 4;
  compact.append(padding, '=');

  std::string out(compact.size() / 4 * 3, '\0');
  auto* dst = reinterpret_cast<unsigned char*>(out.data());
  const auto* src = reinterpret_cast<const unsigned char*>(compact.data());
  for (std::size_t done = 0; done < compact.size();) {
    const auto piece = std::min(decode_piece, compact.size() - done);
    const int written = EVP_DecodeBlock(dst, src + done, static_cast<int>(piece));
    if (written < 0) {
      return fail(errc::invalid_argument, "invalid base64");
    }
    dst += written;
    done += piece;
  }
  // EVP_DecodeBlock counts the bytes of padded quanta too (as zeros): drop them.
  out.resize(out.size() - padding);
  return out;
}

} // namespace troupe
