#pragma once

/// \file
/// The blob store beside the database: uploaded files and run artifacts live as files
/// with random names under `<data-dir>/files`; their `files` rows point at them.

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/runtime/error.hpp"

namespace troupe::storage {

/// Writes `data` to a new file (mode 0600, fsynced) with a random name under `dir`,
/// creating `dir` if needed; returns the name.
expected<std::string> store_file_bytes(const std::filesystem::path& dir, std::string_view data);

/// What `remove_conversation_bytes` removed.
struct removed_bytes {
  std::size_t files = 0;
  bool workspace = false;
};

/// Removes what a deleted conversation left on disk: the bytes of its files
/// (`storage_paths`, relative to `data_dir`, each under `files/`) and its workspace
/// `<data_dir>/workspaces/<conversation_uuid>` with everything in it (symlinks are removed,
/// never followed). A path that would leave its directory is refused, not removed; a
/// missing one is not an error. Blocks: run it on the blocking pool.
expected<removed_bytes> remove_conversation_bytes(const std::filesystem::path& data_dir,
                                                  std::string_view conversation_uuid,
                                                  const std::vector<std::string>& storage_paths);

} // namespace troupe::storage
