// Secrets written to the data directory with mode 0600 from the first byte.

#include "private_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace troupe::api {

expected<void> write_private_file(const std::filesystem::path& path, std::string_view text) {
  const auto tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return fail(errc::io_error, fmt::format("cannot create {}: {}", tmp, std::strerror(errno)));
  }
  ::fchmod(fd, 0600);
  std::size_t done = 0;
  while (done < text.size()) {
    const auto n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      const auto message = fmt::format("cannot write {}: {}", tmp, std::strerror(errno));
      ::close(fd);
      return fail(errc::io_error, message);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    return fail(errc::io_error, fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return fail(errc::io_error, fmt::format("cannot rename {}: {}", tmp, std::strerror(errno)));
  }
  return {};
}

} // namespace troupe::api
