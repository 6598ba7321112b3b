#pragma once

/// \file
/// Splitting a `multipart/form-data` request body (RFC 7578) into its parts, as file
/// uploads arrive. The parts view the body; nothing is copied but the part headers.

#include <string>
#include <string_view>
#include <vector>

#include "troupe/runtime/error.hpp"

namespace troupe::net {

/// One part of a multipart/form-data body.
struct form_part {
  /// The `name` parameter of its Content-Disposition header.
  std::string name;
  /// The `filename` parameter of its Content-Disposition header, or empty.
  std::string filename;
  /// Its Content-Type header, or empty.
  std::string content_type;
  /// Its bytes, a view into the body given to `parse_multipart`.
  std::string_view data;
};

/// The value of parameter `key` in a header value such as `form-data; name="file"`,
/// unquoted (backslash escapes removed); empty when absent.
std::string header_parameter(std::string_view header, std::string_view key);

/// Splits `body` at the boundary named by `content_type` (which must be
/// multipart/form-data). Fails with invalid_argument, in words for the client, on a
/// missing or over-long (> 70 bytes) boundary, a body without parts, a malformed
/// delimiter, or a part without a header end or without a closing delimiter.
expected<std::vector<form_part>> parse_multipart(std::string_view content_type,
                                                 std::string_view body);

} // namespace troupe::net
