#include "troupe/tools/workspace.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <dirent.h>
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

std::string_view describe_file_type(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return "a regular file";
    case S_IFDIR:
      return "a directory";
    case S_IFLNK:
      return "a symbolic link";
    case S_IFIFO:
      return "a FIFO";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    case S_IFSOCK:
      return "a socket";
    default:
      return "an unknown kind of file";
  }
}

expected<file_handle> workspace::open_file(std::string_view relative_path, int flags,
                                           unsigned mode) const {
  const int root_fd = ::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) {
    return tl::unexpected(errno_error("open", root_.string(), errno));
  }
  file_handle root(root_fd);
  const std::string path(relative_path);
  if ((flags & O_PATH) != 0) {
    const int fd = open_beneath(root.get(), path.c_str(), flags, mode);
    if (fd < 0) {
      return tl::unexpected(errno_error("open", relative_path, errno));
    }
    return file_handle(fd);
  }
  const bool want_directory = (flags & O_DIRECTORY) != 0;
  const bool writing = (flags & O_ACCMODE) != O_RDONLY;
  // Twice at most: a file created by someone else between the look and the creation is
  // looked at again.
  for (int attempt = 0; attempt < 2; ++attempt) {
    // O_PATH first: it resolves the path without opening the file for I/O, so a FIFO
    // cannot block here and no device driver's open runs.
    const int probe_fd = open_beneath(root.get(), path.c_str(), O_PATH | (flags & O_NOFOLLOW), 0);
    if (probe_fd < 0) {
      const int err = errno;
      if (err == ENOENT && (flags & O_CREAT) != 0 && !want_directory) {
        // A new file, created exclusively (so it is a regular file, and a symlink or FIFO
        // put in its place meanwhile makes this fail instead of being opened).
        const int created =
            open_beneath(root.get(), path.c_str(),
                         (flags & ~O_TRUNC) | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK, mode);
        if (created >= 0) {
          ::fcntl(created, F_SETFL, ::fcntl(created, F_GETFL) & ~O_NONBLOCK);
          return file_handle(created);
        }
        if (errno == EEXIST) {
          continue;
        }
        return tl::unexpected(errno_error("create", relative_path, errno));
      }
      return tl::unexpected(errno_error("open", relative_path, err));
    }
    file_handle probe(probe_fd);
    struct stat info {};
    if (::fstat(probe.get(), &info) != 0) {
      return tl::unexpected(errno_error("stat", relative_path, errno));
    }
    if (!S_ISDIR(info.st_mode) && !S_ISREG(info.st_mode)) {
      return fail(errc::permission_denied,
                  fmt::format("not a {}: {} is {}; only regular files and directories can be "
                              "used",
                              want_directory ? "directory" : "regular file", relative_path,
                              describe_file_type(info.st_mode)));
    }
    if (S_ISDIR(info.st_mode) && writing) {
      return fail(errc::invalid_argument,
                  fmt::format("'{}' is a directory, not a file", relative_path));
    }
    if (S_ISREG(info.st_mode) && want_directory) {
      return fail(errc::invalid_argument,
                  fmt::format("not a directory: {} is a regular file", relative_path));
    }
    // Reopen the very inode that was checked (a path swapped meanwhile cannot matter).
    const auto self_path = fmt::format("/proc/self/fd/{}", probe.get());
    const int fd = ::open(self_path.c_str(),
                          (flags & ~(O_CREAT | O_EXCL | O_NOFOLLOW)) | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      return tl::unexpected(errno_error("open", relative_path, errno));
    }
    // O_NONBLOCK was a guard only; regular files and directories do not use it.
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return file_handle(fd);
  }
  return fail(errc::io_error,
              fmt::format("'{}' kept changing while it was opened; try again", relative_path));
}

namespace {

/// Entries of the open directory `dir_fd` (which it consumes), lstat'ed by name.
expected<void>
for_each_entry(int dir_fd, std::string_view shown_as,
               const std::function<bool(std::string name, const struct stat&)>& each) {
  DIR* dir = ::fdopendir(dir_fd);
  if (dir == nullptr) {
    const int err = errno;
    ::close(dir_fd);
    return tl::unexpected(errno_error("list", shown_as, err));
  }
  const int fd = ::dirfd(dir);
  for (errno = 0; auto* entry = ::readdir(dir); errno = 0) {
    const std::string_view name = entry->d_name;
    if (name == "." || name == "..") {
      continue;
    }
    struct stat info {};
    if (::fstatat(fd, entry->d_name, &info, AT_SYMLINK_NOFOLLOW) != 0) {
      continue; // gone meanwhile
    }
    if (!each(std::string(name), info)) {
      break;
    }
  }
  ::closedir(dir);
  return {};
}

std::int64_t mtime_ns(const struct stat& info) {
  return static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec;
}

} // namespace

expected<std::vector<workspace_entry>> workspace::list(std::string_view relative_dir,
                                                       std::size_t max_entries) const {
  auto dir = open_file(relative_dir, O_RDONLY | O_DIRECTORY);
  if (!dir) {
    return tl::unexpected(dir.error());
  }
  std::vector<workspace_entry> entries;
  const int fd = ::dup(dir->get());
  if (fd < 0) {
    return tl::unexpected(errno_error("list", relative_dir, errno));
  }
  auto listed = for_each_entry(fd, relative_dir, [&](std::string name, const struct stat& info) {
    entries.push_back({std::move(name), info.st_mode & S_IFMT,
                       static_cast<std::uint64_t>(info.st_size), mtime_ns(info)});
    return entries.size() < max_entries;
  });
  if (!listed) {
    return tl::unexpected(listed.error());
  }
  std::sort(entries.begin(), entries.end(),
            [](const workspace_entry& a, const workspace_entry& b) { return a.path < b.path; });
  return entries;
}

namespace {

struct walk_state {
  std::size_t seen = 0;
  bool stopped = false;
};

} // namespace

expected<void> workspace::walk(std::string_view relative_dir,
                               const std::function<bool(const workspace_entry&)>& visit,
                               const walk_limits& limits) const {
  auto dir = open_file(relative_dir, O_RDONLY | O_DIRECTORY);
  if (!dir) {
    return tl::unexpected(dir.error());
  }
  walk_state st;
  // Depth-first with an explicit stack of open directories (at most max_depth of them).
  struct frame {
    file_handle dir;
    std::string prefix;
  };
  std::vector<frame> stack;
  stack.push_back(
      {std::move(*dir), relative_dir == "." ? std::string() : std::string(relative_dir)});
  while (!stack.empty() && !st.stopped) {
    auto current = std::move(stack.back());
    stack.pop_back();
    std::vector<std::string> subdirectories;
    const int fd = ::dup(current.dir.get());
    if (fd < 0) {
      continue;
    }
    (void)for_each_entry(fd, current.prefix, [&](std::string name, const struct stat& info) {
      if (st.seen >= limits.max_entries || (limits.should_stop && limits.should_stop())) {
        st.stopped = true;
        return false;
      }
      ++st.seen;
      auto path = current.prefix.empty() ? name : current.prefix + "/" + name;
      if (!visit({path, info.st_mode & S_IFMT, static_cast<std::uint64_t>(info.st_size),
                  mtime_ns(info)})) {
        st.stopped = true;
        return false;
      }
      if (S_ISDIR(info.st_mode)) {
        subdirectories.push_back(std::move(name));
      }
      return true;
    });
    const auto depth = current.prefix.empty()
                           ? std::size_t{0}
                           : static_cast<std::size_t>(
                                 std::count(current.prefix.begin(), current.prefix.end(), '/') + 1);
    if (depth + 1 > limits.max_depth) {
      continue;
    }
    // Pushed in reverse so that they are visited in directory order.
    for (auto it = subdirectories.rbegin(); it != subdirectories.rend(); ++it) {
      // O_DIRECTORY | O_NOFOLLOW: something swapped in meanwhile (a symlink, a FIFO) is
      // refused by the kernel before anything is opened.
      const int sub = ::openat(current.dir.get(), it->c_str(),
                               O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
      if (sub >= 0) {
        stack.push_back(
            {file_handle(sub), current.prefix.empty() ? *it : current.prefix + "/" + *it});
      }
    }
  }
  return {};
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
  (void)walk(".", [&](const workspace_entry& e) {
    if (e.type == S_IFREG) {
      files[e.path] = {e.size, e.mtime_ns};
    }
    return files.size() < max_files;
  });
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
