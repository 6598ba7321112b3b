#pragma once

// Starts the real `troupe` binary as a child process for integration tests, reads its
// log to learn the port it bound, and stops it with a signal.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace troupe::test {

/// A fresh temporary directory, removed when destroyed.
class temp_dir {
public:
  temp_dir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "troupe-test-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~temp_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const noexcept {
    return path_;
  }

private:
  std::filesystem::path path_;
};

/// A running `troupe` child process with its stderr captured.
class troupe_process {
public:
  explicit troupe_process(std::vector<std::string> args) {
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
      throw std::runtime_error("pipe failed");
    }
    // Everything the child needs is made before the fork: between fork and exec the child
    // of a multithreaded process may only make async-signal-safe calls (an allocation
    // there can wait forever on a malloc lock another thread held at the fork, which
    // under ASan left a restarted troupe silent about one time in six).
    std::string binary = TROUPE_BINARY;
    std::vector<char*> argv;
    argv.push_back(binary.data());
    for (auto& a : args) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(pipe_fds[1], STDERR_FILENO);
      ::dup2(pipe_fds[1], STDOUT_FILENO);
      ::execv(binary.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(pipe_fds[1]);
    output_fd_ = pipe_fds[0];
  }
  troupe_process(const troupe_process&) = delete;
  troupe_process& operator=(const troupe_process&) = delete;
  ~troupe_process() {
    if (!exit_code_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(output_fd_);
  }

  /// Reads output until the "listening on http://HOST:PORT" line; the port, or nullopt
  /// if the process ended or `timeout` passed first.
  std::optional<std::uint16_t>
  wait_for_port(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    static const std::regex listening(R"(listening on http://[^ ]*:(\d+))");
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      std::smatch m;
      if (std::regex_search(output_, m, listening)) {
        return static_cast<std::uint16_t>(std::stoi(m[1]));
      }
      if (!read_output(std::chrono::milliseconds(50))) {
        return std::nullopt;
      }
    }
    return std::nullopt;
  }

  /// The child's process id (for /proc/<pid>/status).
  pid_t pid() const noexcept {
    return pid_;
  }

  void signal(int signo) {
    ::kill(pid_, signo);
  }

  /// Waits for the process to end; its exit code (128+N for signal N), or nullopt on
  /// timeout.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!exit_code_ && std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      const auto r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      read_output(std::chrono::milliseconds(20));
    }
    while (read_output(std::chrono::milliseconds(0))) {
    }
    return exit_code_;
  }

  /// Everything the process printed so far.
  const std::string& output() {
    while (read_output(std::chrono::milliseconds(0))) {
    }
    return output_;
  }

private:
  // Reads what is available; false at end of output.
  bool read_output(std::chrono::milliseconds timeout) {
    pollfd p{output_fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) {
      return timeout.count() > 0; // nothing yet is not the end
    }
    char buffer[4096];
    const auto n = ::read(output_fd_, buffer, sizeof buffer);
    if (n <= 0) {
      return false;
    }
    output_.append(buffer, static_cast<std::size_t>(n));
    return true;
  }

  pid_t pid_ = -1;
  int output_fd_ = -1;
  std::string output_;
  std::optional<int> exit_code_;
};

} // namespace troupe::test
