#include "troupe/tools/workspace.hpp"

#include <cerrno>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace troupe::tools {

file_handle::file_handle(file_handle&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

file_handle& file_handle::operator=(file_handle&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) {
      ::close(fd_);
    }
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

file_handle::~file_handle() {
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

namespace {

error escape_error(std::string_view user_path) {
  return {errc::permission_denied,
          fmt::format("'{}' is outside the workspace; use a path relative to it", user_path)};
}

error errno_error(std::string_view what, std::string_view path, int err) {
  if (err == EXDEV || err == ELOOP) {
    return {errc::permission_denied,
            fmt::format("'{}' resolves outside the workspace (through a symlink)", path)};
  }
  if (err == ENOENT || err == ENOTDIR) {
    return {errc::not_found, fmt::format("'{}' does not exist in the workspace", path)};
  }
  if (err == EACCES || err == EPERM) {
    return {errc::permission_denied, fmt::format("cannot {} '{}': permission denied", what, path)};
  }
  return {errc::io_error, fmt::format("cannot {} '{}': {}", what, path, std::strerror(err))};
}

// openat2 beneath `dir_fd`: the kernel refuses any resolution that leaves it.
int open_beneath(int dir_fd, const char* relative_path, int flags, unsigned mode) {
  open_how how{};
  how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC);
  how.mode = (flags & O_CREAT) != 0 ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(::syscall(SYS_openat2, dir_fd, relative_path, &how, sizeof how));
}

} // namespace

expected<workspace> workspace::open(const std::filesystem::path& root) {
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec) {
    return fail(errc::io_error,
                fmt::format("cannot create workspace '{}': {}", root.string(), ec.message()));
  }
  auto canonical = std::filesystem::canonical(root, ec);
  if (ec) {
    return fail(errc::io_error, fmt::format("workspace '{}': {}", root.string(), ec.message()));
  }
  return workspace(std::move(canonical));
}

expected<std::string> workspace::relative(std::string_view user_path) const {
  if (user_path.empty()) {
    return fail(errc::invalid_argument, "the path is empty");
  }
  if (user_path.find('\0') != std::string_view::npos) {
    return fail(errc::invalid_argument, "the path contains a NUL byte");
  }
  std::string_view rest = user_path;
  if (rest.front() == '/') {
    const std::string host_root = root_.string();
    const auto strip = [&rest](std::string_view prefix) {
      if (rest == prefix) {
        rest = {};
        return true;
      }
      if (rest.size() > prefix.size() && rest.substr(0, prefix.size()) == prefix &&
          rest[prefix.size()] == '/') {
        rest.remove_prefix(prefix.size() + 1);
        return true;
      }
      return false;
    };
    if (!strip(sandbox_workspace_root) && !strip(host_root)) {
      return tl::unexpected(escape_error(user_path));
    }
  }
  std::vector<std::string_view> parts;
  while (!rest.empty()) {
    const auto slash = rest.find('/');
    const auto part = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    if (part.empty() || part == ".") {
      continue;
    }
    if (part == "..") {
      if (parts.empty()) {
        return tl::unexpected(escape_error(user_path));
      }
      parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  if (parts.empty()) {
    return std::string(".");
  }
  std::string out;
  for (const auto part : parts) {
    if (!out.empty()) {
      out.push_back('/');
    }
    out.append(part);
  }
  return out;
}

expected<file_handle> workspace::open_file(std::string_view relative_path, int flags,
                                           unsigned mode) const {
  const int root_fd = ::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) {
    return tl::unexpected(errno_error("open", root_.string(), errno));
  }
  file_handle root(root_fd);
  const std::string path(relative_path);
  const int fd = open_beneath(root.get(), path.c_str(), flags, mode);
  if (fd < 0) {
    return tl::unexpected(errno_error("open", relative_path, errno));
  }
  return file_handle(fd);
}

expected<std::string> workspace::read_file(std::string_view relative_path,
                                           std::size_t max_bytes) const {
  auto file = open_file(relative_path, O_RDONLY);
  if (!file) {
    return tl::unexpected(file.error());
  }
  struct stat info {};
  if (::fstat(file->get(), &info) != 0) {
    return tl::unexpected(errno_error("stat", relative_path, errno));
  }
  if (S_ISDIR(info.st_mode)) {
    return fail(errc::invalid_argument, fmt::format("'{}' is a directory", relative_path));
  }
  if (static_cast<std::uint64_t>(info.st_size) > max_bytes) {
    return fail(errc::limit_exceeded, fmt::format("'{}' is {} bytes; at most {} can be read",
                                                  relative_path, info.st_size, max_bytes));
  }
  std::string content(static_cast<std::size_t>(info.st_size), '\0');
  std::size_t done = 0;
  while (done < content.size()) {
    const auto n = ::read(file->get(), content.data() + done, content.size() - done);
    if (n < 0) {
      return tl::unexpected(errno_error("read", relative_path, errno));
    }
    if (n == 0) {
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  content.resize(done);
  return content;
}

expected<void> workspace::make_directories(std::string_view relative_dir) const {
  if (relative_dir.empty() || relative_dir == ".") {
    return {};
  }
  std::string prefix;
  std::string_view rest = relative_dir;
  while (!rest.empty()) {
    const auto slash = rest.find('/');
    const auto part = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    auto parent = open_file(prefix.empty() ? "." : prefix, O_PATH | O_DIRECTORY);
    if (!parent) {
      return tl::unexpected(parent.error());
    }
    const std::string name(part);
    if (::mkdirat(parent->get(), name.c_str(), 0755) != 0 && errno != EEXIST) {
      return tl::unexpected(errno_error("create directory", relative_dir, errno));
    }
    prefix = prefix.empty() ? name : prefix + "/" + name;
  }
  return {};
}

expected<std::uint64_t> workspace::write_file(std::string_view relative_path,
                                              std::string_view content, bool append) const {
  const auto slash = relative_path.rfind('/');
  if (slash != std::string_view::npos) {
    auto made = make_directories(relative_path.substr(0, slash));
    if (!made) {
      return tl::unexpected(made.error());
    }
  }
  auto file = open_file(relative_path,
                        O_WRONLY | O_CREAT | O_NOFOLLOW | (append ? O_APPEND : O_TRUNC), 0644);
  if (!file) {
    return tl::unexpected(file.error());
  }
  std::size_t done = 0;
  while (done < content.size()) {
    const auto n = ::write(file->get(), content.data() + done, content.size() - done);
    if (n < 0) {
      return tl::unexpected(errno_error("write", relative_path, errno));
    }
    done += static_cast<std::size_t>(n);
  }
  return static_cast<std::uint64_t>(done);
}

std::map<std::string, std::pair<std::uint64_t, std::int64_t>>
workspace::snapshot(std::size_t max_files) const {
  std::map<std::string, std::pair<std::uint64_t, std::int64_t>> files;
  std::error_code ec;
  std::filesystem::recursive_directory_iterator it(
      root_, std::filesystem::directory_options::skip_permission_denied, ec);
  for (; !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (files.size() >= max_files) {
      break;
    }
    const auto status = it->symlink_status(ec);
    if (ec || !std::filesystem::is_regular_file(status)) {
      continue;
    }
    struct stat info {};
    if (::lstat(it->path().c_str(), &info) != 0) {
      continue;
    }
    const auto mtime =
        static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec;
    files[std::filesystem::relative(it->path(), root_, ec).string()] = {
        static_cast<std::uint64_t>(info.st_size), mtime};
  }
  return files;
}

std::vector<std::string>
changed_files(const std::map<std::string, std::pair<std::uint64_t, std::int64_t>>& before,
              const std::map<std::string, std::pair<std::uint64_t, std::int64_t>>& after) {
  std::vector<std::string> out;
  for (const auto& [path, stamp] : after) {
    const auto old = before.find(path);
    if (old == before.end() || old->second != stamp) {
      out.push_back(path);
    }
  }
  return out;
}

std::string detect_mime(std::string_view path, std::string_view head) {
  const auto starts = [&head](std::string_view magic) {
    return head.substr(0, magic.size()) == magic;
  };
  if (starts("\x89PNG\r\n\x1a\n")) {
    return "image/png";
  }
  if (starts("\xFF\xD8\xFF")) {
    return "image/jpeg";
  }
  if (starts("GIF87a") || starts("GIF89a")) {
    return "image/gif";
  }
  if (starts("%PDF-")) {
    return "application/pdf";
  }
  const auto dot = path.rfind('.');
  std::string ext = dot == std::string_view::npos ? "" : std::string(path.substr(dot + 1));
  for (auto& c : ext) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  static const std::map<std::string, std::string, std::less<>> by_extension = {
      {"csv", "text/csv"},
      {"tsv", "text/tab-separated-values"},
      {"txt", "text/plain"},
      {"log", "text/plain"},
      {"md", "text/markdown"},
      {"json", "application/json"},
      {"jsonl", "application/x-ndjson"},
      {"html", "text/html"},
      {"htm", "text/html"},
      {"xml", "application/xml"},
      {"yaml", "application/yaml"},
      {"yml", "application/yaml"},
      {"svg", "image/svg+xml"},
      {"py", "text/x-python"},
      {"js", "text/javascript"},
      {"sh", "application/x-sh"},
      {"xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
      {"docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
      {"pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation"},
      {"zip", "application/zip"},
  };
  const bool zip = starts("PK\x03\x04");
  if (const auto it = by_extension.find(ext); it != by_extension.end()) {
    const bool office = ext == "xlsx" || ext == "docx" || ext == "pptx" || ext == "zip";
    if (office == zip) {
      return it->second; // the content agrees with the extension
    }
  }
  if (zip) {
    return "application/zip";
  }
  // No magic and no trusted extension: text if the head has no NUL byte.
  if (head.find('\0') == std::string_view::npos) {
    return "text/plain";
  }
  return "application/octet-stream";
}

} // namespace troupe::tools
