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

namespace {

// One plain name: no separator, not "." or "..", not empty.
bool plain_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

// A relative path below files/ made of plain names only ("files/ab12", "files/ab/cd").
bool below_files(std::string_view path) {
  constexpr std::string_view prefix = "files/";
  if (!path.starts_with(prefix)) {
    return false;
  }
  path.remove_prefix(prefix.size());
  for (;;) {
    const auto slash = path.find('/');
    if (!plain_name(path.substr(0, slash))) {
      return false;
    }
    if (slash == std::string_view::npos) {
      return true;
    }
    path.remove_prefix(slash + 1);
  }
}

} // namespace

expected<removed_bytes> remove_conversation_bytes(const std::filesystem::path& data_dir,
                                                  std::string_view conversation_uuid,
                                                  const std::vector<std::string>& storage_paths) {
  removed_bytes out;
  std::string problems;
  for (const auto& stored : storage_paths) {
    const std::string_view path(stored);
    if (!below_files(path)) {
      problems += fmt::format("{}refused to remove '{}' (not a name under files/)",
                              problems.empty() ? "" : "; ", stored);
      continue;
    }
    std::error_code ec;
    if (std::filesystem::remove(data_dir / path, ec)) {
      ++out.files;
    } else if (ec) {
      problems +=
          fmt::format("{}cannot remove {}: {}", problems.empty() ? "" : "; ", stored, ec.message());
    }
  }
  if (!plain_name(conversation_uuid)) {
    problems += fmt::format("{}refused to remove the workspace of '{}' (not a plain name)",
                            problems.empty() ? "" : "; ", conversation_uuid);
  } else {
    // remove_all removes symlinks themselves, never what they point at.
    const auto workspace = data_dir / "workspaces" / std::string(conversation_uuid);
    std::error_code ec;
    const auto n = std::filesystem::remove_all(workspace, ec);
    if (ec) {
      problems += fmt::format("{}cannot remove the workspace {}: {}", problems.empty() ? "" : "; ",
                              workspace.string(), ec.message());
    }
    out.workspace = n > 0 && n != static_cast<std::uintmax_t>(-1);
  }
  if (!problems.empty()) {
    return fail(errc::io_error, problems);
  }
  return out;
}

} // namespace troupe::storage
