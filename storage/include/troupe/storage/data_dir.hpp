#pragma once

/// \file
/// The data directory: created on first start, checked for writability, and locked so
/// that two troupe processes never share one database.

#include <filesystem>

#include "troupe/runtime/error.hpp"

namespace troupe::storage {

/// An exclusive hold on a data directory (an advisory lock on `<dir>/troupe.lock`),
/// released when destroyed.
class data_dir_lock {
public:
  data_dir_lock() = default;
  data_dir_lock(data_dir_lock&& other) noexcept;
  data_dir_lock& operator=(data_dir_lock&& other) noexcept;
  data_dir_lock(const data_dir_lock&) = delete;
  data_dir_lock& operator=(const data_dir_lock&) = delete;
  ~data_dir_lock();

  const std::filesystem::path& path() const noexcept {
    return path_;
  }

private:
  friend expected<data_dir_lock> open_data_dir(const std::filesystem::path& dir);
  data_dir_lock(std::filesystem::path path, int fd) : path_(std::move(path)), fd_(fd) {}

  std::filesystem::path path_;
  int fd_ = -1;
};

/// Creates `dir` (and parents) when missing, with mode 0700, and takes its lock. Fails
/// with `conflict` when another process holds it, naming that process's pid.
expected<data_dir_lock> open_data_dir(const std::filesystem::path& dir);

} // namespace troupe::storage
