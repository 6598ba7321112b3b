#include "openclaw_gateway.hpp"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <boost/json/parse.hpp>
#include <fmt/format.h>

#include "troupe/bench/process_stats.hpp"

namespace troupe::bench::detail {

namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// `name` found in a directory of PATH, or empty.
std::string find_in_path(std::string_view name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const auto candidate = std::filesystem::path(dir.empty() ? "." : dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) {
      return candidate.string();
    }
  }
  return {};
}

} // namespace

expected<std::unique_ptr<openclaw_gateway>> openclaw_gateway::start(const openclaw_options& o) {
  // Absolute: the helper runs in <peers>/openclaw.
  const auto peers_dir = std::filesystem::absolute(o.peers_dir);
  const auto script = peers_dir / "openclaw" / "channel.mjs";
  if (!std::filesystem::exists(script)) {
    return fail(errc::not_found, fmt::format("no {} (--peers must be the directory holding "
                                             "openclaw/, bench/peers)",
                                             script.string()));
  }
  if (!std::filesystem::exists(peers_dir / "openclaw" / "node_modules" / "openclaw")) {
    return fail(errc::not_found,
                fmt::format("OpenClaw is not installed in {}: make bench-peers-install",
                            (peers_dir / "openclaw").string()));
  }
  const auto node = find_in_path("node");
  if (node.empty()) {
    return fail(errc::not_found, "no node on PATH (channel.mjs runs on any Node >= 20)");
  }
  std::unique_ptr<openclaw_gateway> self(new openclaw_gateway());
  char pattern[] = "/tmp/troupe-bench-openclaw-run-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) {
    return fail(errc::io_error, "cannot make a temporary directory");
  }
  self->dir_ = pattern;
  self->log_path_ = self->dir_ / "channel.out";
  const int log_fd =
      ::open(self->log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int in_pipe[2];
  if (log_fd < 0 || ::pipe2(in_pipe, O_CLOEXEC) != 0) {
    return fail(errc::io_error, "cannot create the helper's log or stdin pipe");
  }
  std::vector<std::string> args = {
      node,         script.string(), "--mock-base-url", o.mock_base_url,
      "--api-root", o.api_root,      "--bot-token",     o.bot_token};
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  const auto cwd = (peers_dir / "openclaw").string();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    return fail(errc::io_error, "fork failed");
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent || ::chdir(cwd.c_str()) != 0) {
      ::_exit(126);
    }
    ::dup2(in_pipe[0], STDIN_FILENO);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    ::execve(argv[0], argv.data(), environ);
    ::_exit(127);
  }
  ::close(log_fd);
  ::close(in_pipe[0]);
  // The write end stays open (O_CLOEXEC: no other child inherits it) until stop().
  self->stdin_fd_ = in_pipe[1];
  self->helper_pid_ = pid;
  const auto deadline = std::chrono::steady_clock::now() + o.start_timeout;
  for (;;) {
    const auto log = read_text(self->log_path_);
    if (const auto at = log.find("openclaw-ready "); at != std::string::npos) {
      const auto end = log.find('\n', at);
      if (end != std::string::npos) {
        boost::system::error_code ec;
        auto v = boost::json::parse(log.substr(at + 15, end - at - 15), ec);
        if (ec || !v.is_object() || !v.as_object().contains("pid")) {
          self->stop();
          return fail(errc::parse_error, fmt::format("channel.mjs printed a bad ready line:\n{}",
                                                     log.substr(at, end - at)));
        }
        self->ready_ = std::move(v.as_object());
        self->gateway_pid_ = static_cast<pid_t>(self->ready_.at("pid").to_number<long>());
        break;
      }
    }
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      self->stopped_ = true;
      return fail(
          errc::unavailable,
          fmt::format("channel.mjs exited before OpenClaw was ready:\n{}", self->log_tail()));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      auto tail = self->log_tail();
      self->stop();
      return fail(errc::timeout, fmt::format("OpenClaw was not ready within {} s:\n{}",
                                             o.start_timeout.count() / 1000, tail));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return self;
}

openclaw_gateway::~openclaw_gateway() {
  stop();
}

void openclaw_gateway::stop(std::chrono::milliseconds limit) {
  if (stopped_ || helper_pid_ <= 0) {
    stopped_ = true;
  } else {
    stopped_ = true;
    // Everything of the helper's tree now, to be sure nothing of it outlives the bench.
    const auto tree = process_tree(helper_pid_);
    ::kill(helper_pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    bool reaped = false;
    while (std::chrono::steady_clock::now() < deadline) {
      if (::waitpid(helper_pid_, &status, WNOHANG) == helper_pid_) {
        reaped = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (const pid_t p : tree) {
      if (p != helper_pid_ && ::kill(p, 0) == 0) {
        ::kill(p, SIGKILL);
      }
    }
    if (!reaped) {
      ::kill(helper_pid_, SIGKILL);
      ::waitpid(helper_pid_, &status, 0);
    }
  }
  if (stdin_fd_ >= 0) {
    ::close(stdin_fd_);
    stdin_fd_ = -1;
  }
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    dir_.clear();
  }
}

std::string openclaw_gateway::log_tail() const {
  const auto log = read_text(log_path_);
  return log.size() > 4'000 ? log.substr(log.size() - 4'000) : log;
}

} // namespace troupe::bench::detail
