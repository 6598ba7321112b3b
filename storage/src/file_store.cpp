#include "troupe/storage/file_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "troupe/runtime/crypto.hpp"

namespace troupe::storage {

expected<std::string> store_file_bytes(const std::filesystem::path& dir, std::string_view data) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return fail(errc::io_error, fmt::format("cannot create {}: {}", dir.string(), ec.message()));
  }
  auto random = random_bytes(16);
  if (!random) {
    return tl::unexpected(random.error());
  }
  const auto name = to_hex(*random);
  const auto path = dir / name;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return fail(errc::io_error, fmt::format("cannot create a file: {}", std::strerror(errno)));
  }
  std::size_t done = 0;
  while (done < data.size()) {
    const auto n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      const auto message = fmt::format("cannot write a file: {}", std::strerror(errno));
      ::close(fd);
      ::unlink(path.c_str());
      return fail(errc::io_error, message);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(path.c_str());
    return fail(errc::io_error, fmt::format("cannot write a file: {}", std::strerror(errno)));
  }
  return name;
}

} // namespace troupe::storage
