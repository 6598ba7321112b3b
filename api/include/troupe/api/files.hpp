#pragma once

/// \file
/// Signed, expiring download links for stored files, and the key that signs them. The
/// file routes themselves (upload, metadata, list, download) are added by `add_routes`.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "troupe/runtime/error.hpp"

namespace troupe::api {

/// Reads `<data_dir>/link.secret`, creating it (32 random bytes, mode 0600) if missing.
expected<std::string> load_link_secret(const std::filesystem::path& data_dir);

/// A signed download link for file `uuid`, valid until `expires` (Unix seconds).
std::string signed_file_link(const std::string& secret, std::string_view uuid,
                             std::int64_t expires);
/// Whether `sig` signs (`uuid`, `expires`) under `secret` (constant-time).
bool check_file_signature(const std::string& secret, std::string_view uuid,
                          std::string_view expires, std::string_view sig);

} // namespace troupe::api

namespace troupe::actors {
// Where these lived before api/ existed; tests/integration/api_test.cpp still names them so.
using api::signed_file_link;
} // namespace troupe::actors
