#include "troupe/storage/data_dir.hpp"

#include <cerrno>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

namespace troupe::storage {

data_dir_lock::data_dir_lock(data_dir_lock&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

data_dir_lock& data_dir_lock::operator=(data_dir_lock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) {
      ::close(fd_);
    }
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

data_dir_lock::~data_dir_lock() {
  if (fd_ >= 0) {
    ::close(fd_); // releases the flock
  }
}

expected<data_dir_lock> open_data_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return fail(errc::io_error,
                fmt::format("cannot create data directory '{}': {}", dir.string(), ec.message()));
  }
  if (!std::filesystem::is_directory(dir)) {
    return fail(errc::invalid_argument,
                fmt::format("data directory '{}' is not a directory", dir.string()));
  }
  const auto lock_path = dir / "troupe.lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return fail(errc::io_error,
                fmt::format("cannot open '{}': {}", lock_path.string(), std::strerror(errno)));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char holder[32] = {};
    const auto n = ::pread(fd, holder, sizeof holder - 1, 0);
    ::close(fd);
    return fail(errc::conflict,
                fmt::format("data directory '{}' is in use by another troupe process (pid {})",
                            dir.string(),
                            n > 0 ? std::string(holder, static_cast<std::size_t>(n)) : "unknown"));
  }
  const auto pid = std::to_string(::getpid());
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const auto reason = std::strerror(errno);
    ::close(fd);
    return fail(errc::io_error,
                fmt::format("data directory '{}' is not writable: {}", dir.string(), reason));
  }
  return data_dir_lock(std::filesystem::absolute(dir), fd);
}

} // namespace troupe::storage
