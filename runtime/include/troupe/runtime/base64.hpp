#pragma once

/// \file
/// Base64 (RFC 4648, standard alphabet, padded) for file payloads in JSON.

#include <string>
#include <string_view>

#include "troupe/runtime/error.hpp"

namespace troupe {

std::string base64_encode(std::string_view bytes);
/// Decodes standard base64; whitespace is ignored, padding optional. Other characters
/// are an invalid_argument error naming the offset.
expected<std::string> base64_decode(std::string_view text);

} // namespace troupe
