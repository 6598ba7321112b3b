#pragma once

// Private to api/: secrets written to the data directory (the admin token, the link key).

#include <filesystem>
#include <string_view>

#include "troupe/runtime/error.hpp"

namespace troupe::api {

/// Writes `text` to `path` with mode 0600 via a temporary file and a rename, so a reader
/// never sees half a file and the mode is right from the first byte.
expected<void> write_private_file(const std::filesystem::path& path, std::string_view text);

} // namespace troupe::api
