#pragma once

/// \file
/// The blob store beside the database: uploaded files and run artifacts live as files
/// with random names under `<data-dir>/files`; their `files` rows point at them.

#include <filesystem>
#include <string>
#include <string_view>

#include "troupe/runtime/error.hpp"

namespace troupe::storage {

/// Writes `data` to a new file (mode 0600, fsynced) with a random name under `dir`,
/// creating `dir` if needed; returns the name.
expected<std::string> store_file_bytes(const std::filesystem::path& dir, std::string_view data);

} // namespace troupe::storage
