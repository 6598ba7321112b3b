#include "troupe/net/mcp/stdio_transport.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <deque>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "async_event.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/runtime/settings.hpp"

extern char** environ;

namespace troupe::net::mcp {

namespace {

using std::chrono::steady_clock;

// The variables a stdio server inherits from troupe (what the official SDKs pass on).
constexpr std::array<std::string_view, 8> base_variables = {"PATH",  "HOME", "USER", "LOGNAME",
                                                            "SHELL", "TERM", "LANG", "TMPDIR"};

// Lines of stderr kept to explain an exit.
constexpr std::size_t kept_stderr_lines = 5;
// Longest stderr line relayed to the log.
constexpr std::size_t max_log_line = 4096;
// After the process exited, how long stdout may stay open (a grandchild holding it).
constexpr auto exit_grace = std::chrono::seconds(1);

struct pipe_ends {
  int read = -1;
  int write = -1;
};

expected<pipe_ends> make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return fail(errc::io_error, fmt::format("pipe2 failed: {}", std::strerror(errno)));
  }
  return pipe_ends{fds[0], fds[1]};
}

std::string exit_text(int status) {
  if (WIFEXITED(status)) {
    return fmt::format("exited with code {}", WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return fmt::format("was killed by signal {}", WTERMSIG(status));
  }
  return "ended";
}

class stdio_transport final : public transport,
                              public std::enable_shared_from_this<stdio_transport> {
public:
  stdio_transport(asio::any_io_executor executor, stdio_options options)
      : executor_(executor), options_(std::move(options)), stdin_(executor), stdout_(executor),
        stderr_(executor), pidfd_(executor), exited_(executor), drained_(executor),
        log_(log::context{{"mcp_server", options_.name}}) {}

  ~stdio_transport() override {
    if (pid_ > 0 && !reaped_) {
      // Destroyed without close (a node stopping hard): the group must not outlive us.
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  asio::awaitable<expected<void>> start(std::weak_ptr<transport_events> events) override {
    events_ = std::move(events);
    if (options_.argv.empty() || options_.argv.front().empty()) {
      co_return fail(errc::invalid_argument, "a stdio MCP server needs a command");
    }
    auto in = make_pipe();
    auto out = make_pipe();
    auto err = make_pipe();
    if (!in || !out || !err) {
      for (auto* p : {&in, &out, &err}) {
        if (*p) {
          ::close((*p)->read);
          ::close((*p)->write);
        }
      }
      co_return fail(errc::io_error, "cannot make the pipes of a stdio MCP server");
    }
    std::vector<std::string> env_storage;
    auto env = stdio_base_environment(environment_snapshot());
    for (const auto& [k, v] : options_.env) {
      env[k] = v;
    }
    for (const auto& [k, v] : env) {
      env_storage.push_back(k + "=" + v);
    }
    std::vector<char*> envp;
    for (auto& e : env_storage) {
      envp.push_back(e.data());
    }
    envp.push_back(nullptr);
    std::vector<std::string> argv_storage = options_.argv;
    std::vector<char*> argv;
    for (auto& a : argv_storage) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in->read, 0);
    posix_spawn_file_actions_adddup2(&actions, out->write, 1);
    posix_spawn_file_actions_adddup2(&actions, err->write, 2);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    // A group of its own (to signal the whole tree), default signal dispositions (troupe
    // ignores SIGPIPE; an ignored signal would stay ignored across exec) and no mask.
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGHUP);
    sigset_t empty;
    sigemptyset(&empty);
    posix_spawnattr_setsigdefault(&attributes, &defaults);
    posix_spawnattr_setsigmask(&attributes, &empty);
    posix_spawnattr_setpgroup(&attributes, 0);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF |
                                              POSIX_SPAWN_SETSIGMASK);
    pid_t pid = 0;
    const int spawned =
        ::posix_spawnp(&pid, argv[0], &actions, &attributes, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    ::close(in->read);
    ::close(out->write);
    ::close(err->write);
    if (spawned != 0) {
      ::close(in->write);
      ::close(out->read);
      ::close(err->read);
      co_return fail(errc::unavailable,
                     fmt::format("cannot start MCP server '{}' ({}): {}", options_.name,
                                 options_.argv.front(), std::strerror(spawned)));
    }
    pid_ = pid;
    ::fcntl(in->write, F_SETFL, ::fcntl(in->write, F_GETFL) | O_NONBLOCK);
    stdin_.assign(in->write);
    stdout_.assign(out->read);
    stderr_.assign(err->read);
    open_ = true;
    log_.info("started MCP server '{}' (pid {}): {}", options_.name, pid_,
              fmt::join(options_.argv, " "));
    auto self = shared_from_this();
    const int raw_pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
    if (raw_pidfd >= 0) {
      pidfd_.assign(raw_pidfd);
      asio::co_spawn(executor_, watch_exit(self), asio::detached);
    }
    asio::co_spawn(executor_, read_stdout(self), asio::detached);
    asio::co_spawn(executor_, read_stderr(self), asio::detached);
    co_return expected<void>{};
  }

  asio::awaitable<expected<void>> send(std::string message, std::string,
                                       steady_clock::time_point) override {
    if (!open_) {
      co_return fail(errc::unavailable, closed_reason());
    }
    message.push_back('\n');
    queue_.push_back(std::move(message));
    if (!writing_) {
      writing_ = true;
      // The writer runs on its own: a caller cancelled mid-write must not cut a message.
      asio::co_spawn(executor_, drain(shared_from_this()), asio::detached);
    }
    co_return expected<void>{};
  }

  void set_protocol_version(std::string) override {}

  asio::awaitable<void> close() override {
    auto self = shared_from_this();
    if (pid_ <= 0 || closing_) {
      co_return;
    }
    closing_ = true;
    open_ = false;
    boost::system::error_code ignored;
    queue_.clear();
    stdin_.close(ignored);
    if (!reaped_ && !co_await exited_.wait_until(steady_clock::now() + options_.close_grace)) {
      ::kill(-pid_, SIGTERM);
      if (!co_await exited_.wait_until(steady_clock::now() + options_.close_grace)) {
        ::kill(-pid_, SIGKILL);
        co_await exited_.wait_until(steady_clock::now() + std::chrono::seconds(5));
      }
    }
    if (!reaped_) {
      reap(true);
    }
    // Whatever of the group is left (a grandchild that ignored the TERM).
    ::kill(-pid_, SIGKILL);
    stdout_.close(ignored);
    stderr_.close(ignored);
    pidfd_.close(ignored);
  }

  bool is_open() const noexcept override {
    return open_;
  }

  std::string describe() const override {
    return fmt::format("stdio: {}", fmt::join(options_.argv, " "));
  }

  long process_id() const noexcept override {
    return open_ && !reaped_ ? static_cast<long>(pid_) : 0;
  }

private:
  static asio::awaitable<void> drain(std::shared_ptr<stdio_transport> self) {
    while (!self->queue_.empty() && self->open_) {
      auto [ec, n] = co_await asio::async_write(self->stdin_, asio::buffer(self->queue_.front()),
                                                asio::as_tuple(asio::use_awaitable));
      (void)n;
      if (ec) {
        self->queue_.clear();
        self->log_.warn("MCP server '{}': writing its stdin failed: {}", self->options_.name,
                        ec.message());
        break;
      }
      self->queue_.pop_front();
    }
    self->writing_ = false;
  }

  static asio::awaitable<void> read_stdout(std::shared_ptr<stdio_transport> self) {
    std::string buffer;
    std::array<char, 16 * 1024> chunk{};
    std::string why;
    for (;;) {
      auto [ec, n] = co_await self->stdout_.async_read_some(asio::buffer(chunk),
                                                            asio::as_tuple(asio::use_awaitable));
      if (ec) {
        if (ec != asio::error::eof) {
          why = ec.message();
        }
        break;
      }
      buffer.append(chunk.data(), n);
      std::size_t start = 0;
      for (;;) {
        const auto end = buffer.find('\n', start);
        if (end == std::string::npos) {
          break;
        }
        std::string_view line(buffer.data() + start, end - start);
        start = end + 1;
        if (!line.empty() && line.back() == '\r') {
          line.remove_suffix(1);
        }
        self->deliver(line);
      }
      buffer.erase(0, start);
      if (buffer.size() > self->options_.max_line_bytes) {
        why = fmt::format("it wrote a line longer than {} bytes", self->options_.max_line_bytes);
        ::kill(-self->pid_, SIGKILL);
        break;
      }
    }
    self->stdout_done_ = true;
    self->drained_.set();
    if (why.empty() && !self->reaped_ && !self->closing_) {
      // Stdout closed: the process is ending (or no longer speaks); give it a moment.
      if (!co_await self->exited_.wait_until(steady_clock::now() + exit_grace)) {
        why = "it closed its stdout";
        ::kill(-self->pid_, SIGKILL);
      }
    }
    self->report_closed(why);
  }

  static asio::awaitable<void> read_stderr(std::shared_ptr<stdio_transport> self) {
    std::string buffer;
    std::array<char, 4096> chunk{};
    for (;;) {
      auto [ec, n] = co_await self->stderr_.async_read_some(asio::buffer(chunk),
                                                            asio::as_tuple(asio::use_awaitable));
      if (ec) {
        break;
      }
      buffer.append(chunk.data(), n);
      std::size_t start = 0;
      for (;;) {
        const auto end = buffer.find('\n', start);
        if (end == std::string::npos) {
          break;
        }
        self->log_stderr(std::string_view(buffer.data() + start, end - start));
        start = end + 1;
      }
      buffer.erase(0, start);
      if (buffer.size() > max_log_line) {
        self->log_stderr(buffer);
        buffer.clear();
      }
    }
    if (!buffer.empty()) {
      self->log_stderr(buffer);
    }
  }

  static asio::awaitable<void> watch_exit(std::shared_ptr<stdio_transport> self) {
    co_await self->pidfd_.async_wait(asio::posix::descriptor_base::wait_read,
                                     asio::as_tuple(asio::use_awaitable));
    self->reap(false);
    if (!self->closing_) {
      // Messages it wrote before exiting are still in the pipe: read them first.
      co_await self->drained_.wait_until(steady_clock::now() + exit_grace);
      self->report_closed({});
    }
  }

  void reap(bool wait) {
    if (reaped_ || pid_ <= 0) {
      return;
    }
    int status = 0;
    const auto r = ::waitpid(pid_, &status, wait ? 0 : WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      exit_status_ = status;
      exited_.set();
    }
  }

  void deliver(std::string_view line) {
    if (line.find_first_not_of(" \t") == std::string_view::npos) {
      return;
    }
    auto parsed = parse_jsonrpc(line);
    if (!parsed) {
      log_.warn("MCP server '{}' wrote a line that is not JSON-RPC ({}): {}", options_.name,
                parsed.error().message, line.substr(0, 200));
      return;
    }
    for (auto& m : *parsed) {
      if (auto events = events_.lock()) {
        events->on_message(std::move(m));
      }
    }
  }

  void log_stderr(std::string_view line) {
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    if (line.empty()) {
      return;
    }
    line = line.substr(0, max_log_line);
    last_stderr_.emplace_back(line.substr(0, 300));
    if (last_stderr_.size() > kept_stderr_lines) {
      last_stderr_.pop_front();
    }
    log_.info("MCP server '{}' stderr: {}", options_.name, line);
  }

  std::string closed_reason() const {
    std::string why = fmt::format("MCP server '{}'", options_.name);
    if (reaped_) {
      why += " " + exit_text(exit_status_);
    } else if (!close_why_.empty()) {
      why += ": " + close_why_;
    } else {
      why += " is not running";
    }
    if (!last_stderr_.empty()) {
      why += fmt::format(" (its last stderr lines: {})", fmt::join(last_stderr_, " | "));
    }
    return why;
  }

  void report_closed(std::string why) {
    if (reported_) {
      return;
    }
    if (!why.empty()) {
      close_why_ = std::move(why);
    }
    if (!reaped_) {
      reap(false);
    }
    if (!reaped_ && !stdout_done_) {
      return; // the exit watcher or the reader reports later
    }
    reported_ = true;
    open_ = false;
    const auto reason = closed_reason();
    if (!closing_) {
      log_.warn("{}", reason);
    }
    if (auto events = events_.lock()) {
      events->on_closed(error{errc::unavailable, reason});
    }
  }

  asio::any_io_executor executor_;
  stdio_options options_;
  std::weak_ptr<transport_events> events_;
  asio::posix::stream_descriptor stdin_;
  asio::posix::stream_descriptor stdout_;
  asio::posix::stream_descriptor stderr_;
  asio::posix::stream_descriptor pidfd_;
  detail::async_event exited_;
  detail::async_event drained_;
  log::context log_;
  std::deque<std::string> queue_;
  std::deque<std::string> last_stderr_;
  std::string close_why_;
  pid_t pid_ = 0;
  int exit_status_ = 0;
  bool writing_ = false;
  bool open_ = false;
  bool closing_ = false;
  bool reaped_ = false;
  bool reported_ = false;
  bool stdout_done_ = false;
};

} // namespace

std::map<std::string, std::string>
stdio_base_environment(const std::map<std::string, std::string>& environment) {
  std::map<std::string, std::string> out;
  for (const auto name : base_variables) {
    if (const auto it = environment.find(std::string(name)); it != environment.end()) {
      out.insert(*it);
    }
  }
  return out;
}

std::shared_ptr<transport> make_stdio_transport(asio::any_io_executor executor,
                                                stdio_options options) {
  return std::make_shared<stdio_transport>(std::move(executor), std::move(options));
}

} // namespace troupe::net::mcp
