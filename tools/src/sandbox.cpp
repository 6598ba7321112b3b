#include "troupe/tools/sandbox.hpp"

#include <atomic>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup_v1.hpp"
#include "seccomp_filter.hpp"
#include "troupe/runtime/log.hpp"

namespace troupe::tools {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using std::chrono::steady_clock;

expected<void> check_sandbox_reach(const std::filesystem::path& dir,
                                   const sandbox_options& options) {
  if (::geteuid() != 0 || options.allow_host) {
    return {};
  }
  std::error_code ec;
  auto path = std::filesystem::weakly_canonical(dir, ec);
  if (ec) {
    path = std::filesystem::absolute(dir);
  }
  for (auto p = path; !p.empty(); p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) {
      const bool searchable = st.st_uid == options.uid   ? (st.st_mode & S_IXUSR) != 0
                              : st.st_gid == options.gid ? (st.st_mode & S_IXGRP) != 0
                                                         : (st.st_mode & S_IXOTH) != 0;
      if (!searchable) {
        return fail(errc::permission_denied,
                    fmt::format("sandboxed code runs as uid {}, which cannot enter {} (mode {:o}): "
                                "workspaces under {} cannot be bound and code will not run; "
                                "allow search with `chmod o+x {}` or choose another data_dir",
                                options.uid, p.string(), st.st_mode & 07777, dir.string(),
                                p.string()));
      }
    }
    if (p == p.root_path()) {
      break;
    }
  }
  return {};
}

std::string truncation_marker(std::size_t dropped_bytes) {
  return fmt::format("\n[troupe: output truncated; {} more bytes were dropped]\n", dropped_bytes);
}

namespace {

// Descriptor numbers inside the child, fixed for bubblewrap's arguments.
constexpr int child_seccomp_fd = 10;
constexpr int child_status_fd = 11;
// Descriptors are moved above this before the child starts so its dup2 calls never clash.
constexpr int high_fd_floor = 32;

// Where the workspace is bound for bubblewrap to find it when troupe runs as root: a
// directory every uid may enter, which neither bubblewrap nor the payload otherwise uses
// (bubblewrap takes /tmp for its own pivot, so not that). The bind exists only in the
// child's private mount namespace; the host's /run is untouched.
constexpr const char* reach_mount_point = "/run";
// The same for a request's read-only folder (a skill's), when it has one.
constexpr const char* reach_read_only_point = "/mnt";

constexpr int exit_timed_out = 124;
constexpr int exit_not_run = 126;

/// An owned file descriptor.
class unique_fd {
public:
  unique_fd() = default;
  explicit unique_fd(int fd) : fd_(fd) {}
  unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ~unique_fd() {
    reset();
  }
  int get() const noexcept {
    return fd_;
  }
  int release() noexcept {
    return std::exchange(fd_, -1);
  }
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) {
      ::close(fd_);
    }
    fd_ = fd;
  }

private:
  int fd_ = -1;
};

// Moves `fd` to a number >= high_fd_floor, close-on-exec.
unique_fd lift(int fd) {
  const int lifted = ::fcntl(fd, F_DUPFD_CLOEXEC, high_fd_floor);
  ::close(fd);
  return unique_fd(lifted);
}

struct pipe_pair {
  unique_fd read;
  unique_fd write;
};

expected<pipe_pair> make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return fail(errc::io_error, fmt::format("pipe2 failed: {}", std::strerror(errno)));
  }
  return pipe_pair{lift(fds[0]), lift(fds[1])};
}

bool valid_env_name(std::string_view name) {
  if (name.empty()) {
    return false;
  }
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                    (i > 0 && c >= '0' && c <= '9');
    if (!ok) {
      return false;
    }
  }
  return true;
}

// Everything the child needs, prepared before it is started: the child shares troupe's
// memory until it execs (see spawn_child), so it allocates nothing and only reads this.
struct exec_plan {
  std::vector<std::string> argv_storage;
  std::vector<std::string> env_storage;
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::vector<std::string> cgroup_tasks;
  std::string chdir_to; // host mode only
  // Root only: before dropping privileges the child binds the workspace at
  // `reach_mount_point` in a mount namespace of its own (see sandbox_runner::run).
  std::string reach_source;
  std::string reach_read_only_source;
  rlim_t address_space = 0;
  rlim_t cpu_seconds = 0;
  rlim_t file_size = 0;
  rlim_t processes = 0;
  bool drop_privileges = false;
  uid_t uid = 65534;
  gid_t gid = 65534;
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  int seccomp_fd = -1;
  int status_fd = -1;
  pid_t parent = 0;

  void freeze() {
    for (auto& a : argv_storage) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    for (auto& e : env_storage) {
      envp.push_back(e.data());
    }
    envp.push_back(nullptr);
  }
};

// The child (exec_child and what it calls) runs on a stack that AddressSanitizer does
// not know, in memory it shares with troupe; like glibc's own posix_spawn child it is
// left uninstrumented. (Instrumented, ASan warns of a stack switch at its first noreturn
// call and may report false positives.)
#define TROUPE_TOOLS_CHILD_CODE [[gnu::no_sanitize_address]]

TROUPE_TOOLS_CHILD_CODE void write_all_raw(int fd, const char* text) {
  auto length = std::strlen(text);
  while (length > 0) {
    const auto n = ::write(fd, text, length);
    if (n <= 0) {
      return;
    }
    text += n;
    length -= static_cast<std::size_t>(n);
  }
}

TROUPE_TOOLS_CHILD_CODE void set_limit(int resource, rlim_t value) {
  if (value > 0) {
    const rlimit both{value, value};
    ::setrlimit(resource, &both);
  }
}

// Runs in the child until exec, in memory shared with troupe (whose calling thread is
// suspended meanwhile): system calls only, no allocation, nothing that glibc would turn
// into process-wide work (its setuid wrappers signal every thread of "the process", which
// here would be troupe's threads, hence the raw system calls).
[[noreturn]] TROUPE_TOOLS_CHILD_CODE void exec_child(const exec_plan& plan) {
  // All signals are blocked (spawn_child blocked them around clone): troupe's handlers
  // must not run on this stack. Every disposition goes back to the default and the mask
  // is emptied just before exec, so that nothing troupe handles, ignores or blocks
  // carries over into the program.
  // The raw system call: glibc's sigaction refuses its own two real-time signals (32, 33),
  // and a troupe started with them ignored (some job-control shells do that) would hand
  // the ignore on to the program.
  struct kernel_sigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)();
    unsigned long mask;
  };
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) {
      kernel_sigaction default_action{SIG_DFL, 0, nullptr, 0};
      ::syscall(SYS_rt_sigaction, sig, &default_action, nullptr, sizeof(unsigned long));
    }
  }
  ::dup2(plan.stdin_fd, STDIN_FILENO);
  ::dup2(plan.stdout_fd, STDOUT_FILENO);
  ::dup2(plan.stderr_fd, STDERR_FILENO);
  if (plan.seccomp_fd >= 0) {
    ::dup2(plan.seccomp_fd, child_seccomp_fd);
  }
  if (plan.status_fd >= 0) {
    ::dup2(plan.status_fd, child_status_fd);
  }
  ::syscall(SYS_close_range, child_status_fd + 1, ~0U, 0);
  ::setpgid(0, 0);
  // Join the run's cgroups before anything else runs. This child is a process with a
  // single thread, so moving that thread (writing "0" to the v1 `tasks` file) moves the
  // whole process, and the kernel can skip the global threadgroup lock that a cgroup.procs
  // write takes, whose RCU grace period costs ~10 ms. A run that cannot join its cgroups
  // does not run (they were reported as in force).
  for (const auto& tasks : plan.cgroup_tasks) {
    const int fd = ::open(tasks.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, "0", 1) != 1) {
      write_all_raw(STDERR_FILENO, "troupe sandbox: cannot join the run's cgroups\n");
      ::_exit(exit_not_run);
    }
    ::close(fd);
  }
  // Bubblewrap runs as the sandbox's uid and finds the workspace by path, so every
  // directory above it would have to be searchable by that uid (a data_dir under /root
  // is not). Instead, while still root, bind the workspace at a path anyone may enter,
  // in a mount namespace of this child's own (slave, so nothing propagates back).
  if (!plan.reach_source.empty()) {
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0 ||
        ::mount(plan.reach_source.c_str(), reach_mount_point, nullptr, MS_BIND, nullptr) != 0) {
      write_all_raw(STDERR_FILENO,
                    "troupe sandbox: cannot bind the workspace where the sandbox can reach it: ");
      const char* why = ::strerrordesc_np(errno);
      write_all_raw(STDERR_FILENO, why != nullptr ? why : "unknown error");
      write_all_raw(STDERR_FILENO, "\n");
      ::_exit(exit_not_run);
    }
    if (!plan.reach_read_only_source.empty() &&
        ::mount(plan.reach_read_only_source.c_str(), reach_read_only_point, nullptr, MS_BIND,
                nullptr) != 0) {
      write_all_raw(STDERR_FILENO,
                    "troupe sandbox: cannot bind the read-only folder where the sandbox can "
                    "reach it\n");
      ::_exit(exit_not_run);
    }
  }
  set_limit(RLIMIT_AS, plan.address_space);
  set_limit(RLIMIT_CPU, plan.cpu_seconds);
  set_limit(RLIMIT_FSIZE, plan.file_size);
  set_limit(RLIMIT_NPROC, plan.processes);
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  if (plan.drop_privileges) {
    if (::syscall(SYS_setgroups, 0, nullptr) != 0 || ::syscall(SYS_setgid, plan.gid) != 0 ||
        ::syscall(SYS_setuid, plan.uid) != 0) {
      write_all_raw(STDERR_FILENO, "troupe sandbox: cannot drop privileges\n");
      ::_exit(exit_not_run);
    }
  }
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != plan.parent) {
    ::_exit(exit_not_run); // the parent died before the death signal was armed
  }
  if (!plan.chdir_to.empty() && ::chdir(plan.chdir_to.c_str()) != 0) {
    write_all_raw(STDERR_FILENO, "troupe sandbox: cannot enter the workspace\n");
    ::_exit(exit_not_run);
  }
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(plan.argv[0], plan.argv.data(), plan.envp.data());
  write_all_raw(STDERR_FILENO, "troupe sandbox: exec failed: ");
  const char* why = ::strerrordesc_np(errno); // a constant string: no locale, no allocation
  write_all_raw(STDERR_FILENO, why != nullptr ? why : "unknown error");
  write_all_raw(STDERR_FILENO, "\n");
  ::_exit(exit_not_run);
}

TROUPE_TOOLS_CHILD_CODE int child_entry(void* plan) {
  exec_child(*static_cast<const exec_plan*>(plan));
}

// Starts the child with vfork semantics (clone with CLONE_VM | CLONE_VFORK, as glibc's
// posix_spawn does; posix_spawn itself cannot set rlimits, the uid or the death signal).
// fork() would copy troupe's page tables and leave all of its memory copy-on-write until
// the exec: measured with 256 MiB resident, 4.3 ms in fork and 45 ms of write faults
// afterwards, against 0.04 ms and none this way. The calling thread waits only until
// the child has exec'd. Returns the pid, or -1 with errno set.
pid_t spawn_child(exec_plan& plan) {
  constexpr std::size_t stack_size = 256 * 1024; // generous: sanitizer builds use more
  const auto stack = std::make_unique<char[]>(stack_size);
  plan.parent = ::getpid();
  sigset_t all;
  sigset_t caller_mask;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &caller_mask);
  const pid_t pid =
      ::clone(child_entry, stack.get() + stack_size, CLONE_VM | CLONE_VFORK | SIGCHLD, &plan);
  const int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &caller_mask, nullptr);
  errno = clone_errno;
  return pid;
}

// Output captured from one pipe.
struct capture {
  std::string text;
  std::size_t total = 0;
  std::size_t cap = 0;
  bool done = false;
};

struct run_state {
  explicit run_state(const asio::any_io_executor& ex) : out_pipe(ex), err_pipe(ex), in_pipe(ex) {}
  asio::posix::stream_descriptor out_pipe;
  asio::posix::stream_descriptor err_pipe;
  asio::posix::stream_descriptor in_pipe;
  capture out;
  capture err;
};

asio::awaitable<void> read_capped(std::shared_ptr<run_state> state, bool is_stdout) {
  auto& pipe = is_stdout ? state->out_pipe : state->err_pipe;
  auto& into = is_stdout ? state->out : state->err;
  std::array<char, 16384> buffer;
  for (;;) {
    auto [ec, n] =
        co_await pipe.async_read_some(asio::buffer(buffer), asio::as_tuple(asio::use_awaitable));
    if (n > 0) {
      into.total += n;
      if (into.text.size() < into.cap) {
        into.text.append(buffer.data(), std::min(n, into.cap - into.text.size()));
      }
    }
    if (ec) {
      break;
    }
  }
  into.done = true;
}

// write(2) to a pipe whose reader may be gone, answering EPIPE without raising SIGPIPE:
// nothing in troupe ignores SIGPIPE, so a program that exits without reading its stdin
// would otherwise end troupe. The signal is blocked around the write and, if the write
// raised it, consumed (it is directed at the writing thread).
ssize_t write_without_sigpipe(int fd, const char* data, std::size_t size) {
  sigset_t sigpipe_only;
  ::sigemptyset(&sigpipe_only);
  ::sigaddset(&sigpipe_only, SIGPIPE);
  sigset_t pending;
  ::sigpending(&pending);
  const bool already_pending = ::sigismember(&pending, SIGPIPE) == 1;
  sigset_t previous;
  ::pthread_sigmask(SIG_BLOCK, &sigpipe_only, &previous);
  const auto n = ::write(fd, data, size);
  const int write_errno = errno;
  if (n < 0 && write_errno == EPIPE && !already_pending) {
    const timespec no_wait{0, 0};
    ::sigtimedwait(&sigpipe_only, nullptr, &no_wait);
  }
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  errno = write_errno;
  return n;
}

asio::awaitable<void> feed_stdin(std::shared_ptr<run_state> state, std::string data) {
  auto& pipe = state->in_pipe;
  boost::system::error_code ec;
  pipe.non_blocking(true, ec);
  std::size_t written = 0;
  while (!ec && written < data.size()) {
    const auto n =
        write_without_sigpipe(pipe.native_handle(), data.data() + written, data.size() - written);
    if (n > 0) {
      written += static_cast<std::size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      std::tie(ec) = co_await pipe.async_wait(asio::posix::descriptor_base::wait_write,
                                              asio::as_tuple(asio::use_awaitable));
    } else {
      break; // EPIPE: the program wants no more
    }
  }
  pipe.close(ec);
}

asio::awaitable<void> wait_readable(asio::posix::stream_descriptor& pidfd) {
  co_await pidfd.async_wait(asio::posix::descriptor_base::wait_read,
                            asio::as_tuple(asio::use_awaitable));
}

asio::awaitable<void> sleep_until(steady_clock::time_point when) {
  asio::steady_timer timer(co_await asio::this_coro::executor, when);
  co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
}

// How the supervised process ended.
struct exit_info {
  bool reaped = false;
  bool timed_out = false;
  int status = 0;
};

// Waits for `pid` to exit; at `deadline` kills the tree and waits for the exit. Once it
// has exited, kills whatever it left behind so that the output pipes reach their end.
asio::awaitable<void> supervise(pid_t pid, asio::posix::stream_descriptor* pidfd,
                                steady_clock::time_point deadline, std::function<void()> kill_tree,
                                std::shared_ptr<exit_info> exit) {
  // Peeks at the exit without reaping: while the zombie holds the pid, signalling the
  // pid and its process group cannot hit an unrelated process that reused the number.
  const auto exited = [pid] {
    siginfo_t info{};
    return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid == pid;
  };
  co_await (wait_readable(*pidfd) || sleep_until(deadline));
  if (!exited()) {
    exit->timed_out = true;
    kill_tree();
    co_await (wait_readable(*pidfd) || sleep_until(steady_clock::now() + std::chrono::seconds(5)));
  }
  kill_tree(); // whatever it left behind, so the output pipes reach their end
  if (::waitpid(pid, &exit->status, WNOHANG) == pid) {
    exit->reaped = true;
  }
}

// The integer after `"key":` in bubblewrap's JSON status lines, if present.
std::optional<int> status_field(std::string_view status, std::string_view key) {
  const auto at = status.find(fmt::format("\"{}\"", key));
  if (at == std::string_view::npos) {
    return std::nullopt;
  }
  auto rest = status.substr(at + key.size() + 2);
  while (!rest.empty() && (rest.front() == ':' || rest.front() == ' ')) {
    rest.remove_prefix(1);
  }
  int value = 0;
  const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
  if (ec != std::errc{}) {
    return std::nullopt;
  }
  return value;
}

std::string read_available(int fd) {
  std::string out;
  char buffer[1024];
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  for (;;) {
    const auto n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) {
      break;
    }
    out.append(buffer, static_cast<std::size_t>(n));
  }
  return out;
}

std::atomic<std::uint64_t> run_counter{0};

// Children whose exit status a run is waiting for; the orphan reaper leaves them alone.
std::mutex tracked_mutex;
std::set<pid_t> tracked_children;

void track(pid_t pid, bool on) {
  std::lock_guard lock(tracked_mutex);
  if (on) {
    tracked_children.insert(pid);
  } else {
    tracked_children.erase(pid);
  }
}

// The parent pid in /proc/<pid>/stat, or -1.
pid_t parent_of(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string line;
  std::getline(in, line);
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 4 >= line.size()) {
    return -1;
  }
  // ") S PPID ..." : skip ") ", the state letter and a space.
  return static_cast<pid_t>(std::atol(line.c_str() + close + 4));
}

bool is_tracked(pid_t pid) {
  std::lock_guard lock(tracked_mutex);
  return tracked_children.count(pid) > 0;
}

// The children of this process, read from each thread's /proc children list (an orphan
// re-parented to a subreaper becomes the child of one of its threads); nullopt when the
// kernel does not provide those lists.
std::optional<std::vector<pid_t>> children_of_self() {
  std::vector<pid_t> children;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream in(task.path() / "children");
    if (!in) {
      return std::nullopt;
    }
    pid_t pid = 0;
    while (in >> pid) {
      children.push_back(pid);
    }
  }
  if (ec) {
    return std::nullopt;
  }
  return children;
}

// troupe is a child subreaper (see sandbox_runner's constructor): processes orphaned
// inside a killed host-mode run are re-parented to it rather than to init. This reaps
// those that have exited, leaving children a run is still waiting for. Returns how many
// untracked children remain (still dying).
int reap_orphans() {
  int remaining = 0;
  const auto reap = [&remaining](pid_t pid) {
    if (!is_tracked(pid) && ::waitpid(pid, nullptr, WNOHANG) != pid) {
      ++remaining;
    }
  };
  if (auto children = children_of_self()) {
    for (const auto pid : *children) {
      reap(pid);
    }
    return remaining;
  }
  const auto self = ::getpid();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const auto name = entry.path().filename().string();
    if (name.empty() || name[0] < '0' || name[0] > '9' || parent_of(name) != self) {
      continue;
    }
    reap(static_cast<pid_t>(std::atol(name.c_str())));
  }
  return remaining;
}

// Reaps the child behind `pidfd` if it has exited; false if it is still running. Through
// the pidfd, so a pid number reused meanwhile cannot be hit.
bool reap_if_exited(asio::posix::stream_descriptor& pidfd) {
  constexpr auto p_pidfd = static_cast<idtype_t>(3); // P_PIDFD (Linux 5.4); not in glibc 2.36
  siginfo_t info{};
  const auto fd = static_cast<id_t>(pidfd.native_handle());
  if (::waitid(p_pidfd, fd, &info, WEXITED | WNOHANG) != 0) {
    return true; // not (or no longer) troupe's child: nothing to reap
  }
  return info.si_pid != 0; // 0: still running
}

// Reaps an orphan that outlived the run's cleanup bound once it exits (bounded too).
asio::awaitable<void> reap_when_exited(asio::posix::stream_descriptor pidfd) {
  co_await (wait_readable(pidfd) || sleep_until(steady_clock::now() + std::chrono::minutes(5)));
  reap_if_exited(pidfd);
}

// Waits (until `until` at most) for bubblewrap's sandbox init `pid` to exit and reaps it
// when it was re-parented to troupe: bubblewrap's monitor exits as soon as it knows the
// payload's status, and its init dies just after, an orphan. Once the init has exited,
// its pid namespace is empty (the kernel reaps every process in it first), so nothing
// of the sandbox is left. An init still dying at `until` is reaped in the background.
asio::awaitable<void> reap_sandbox_init(pid_t pid, steady_clock::time_point until) {
  if (pid <= 0 || is_tracked(pid)) {
    co_return;
  }
  const int raw = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (raw < 0) {
    co_return; // already reaped by bubblewrap
  }
  asio::posix::stream_descriptor pidfd(co_await asio::this_coro::executor, raw);
  if (parent_of(std::to_string(pid)) != ::getpid()) {
    co_return; // not troupe's: bubblewrap reaped it and the number was reused
  }
  co_await (wait_readable(pidfd) || sleep_until(until));
  if (!reap_if_exited(pidfd)) {
    auto executor = pidfd.get_executor();
    asio::co_spawn(executor, reap_when_exited(std::move(pidfd)), asio::detached);
  }
}

sandbox_result not_run(std::string why, bool sandboxed) {
  sandbox_result r;
  r.exit_code = exit_not_run;
  r.sandboxed = sandboxed;
  r.error = std::move(why) + "; the code was not run";
  r.stderr_text = r.error + "\n";
  return r;
}

} // namespace

sandbox_runner::sandbox_runner(sandbox_options options) : options_(std::move(options)) {
  static std::once_flag subreaper;
  std::call_once(subreaper, [] { ::prctl(PR_SET_CHILD_SUBREAPER, 1); });
}

asio::awaitable<sandbox_result> sandbox_runner::run(sandbox_request request) const {
  co_await asio::this_coro::throw_if_cancelled(false);
  const bool sandboxed = !options_.allow_host;
  const auto started = steady_clock::now();
  if (request.argv.empty()) {
    co_return not_run("no command given", sandboxed);
  }
  std::error_code fs_ec;
  if (!std::filesystem::is_directory(request.workspace, fs_ec)) {
    co_return not_run(fmt::format("workspace '{}' is not a directory", request.workspace.string()),
                      sandboxed);
  }
  const auto workspace = std::filesystem::canonical(request.workspace, fs_ec);
  std::filesystem::path read_only_dir;
  if (!request.read_only_dir.empty()) {
    read_only_dir = std::filesystem::canonical(request.read_only_dir, fs_ec);
    if (fs_ec || !std::filesystem::is_directory(read_only_dir, fs_ec) ||
        request.read_only_target.empty() || request.read_only_target.front() != '/' ||
        request.read_only_target == "/work" || request.read_only_target == "/tmp") {
      co_return not_run(fmt::format("read-only folder '{}' cannot be bound at '{}'",
                                    request.read_only_dir.string(), request.read_only_target),
                        sandboxed);
    }
  }
  const auto& limits = request.limits;
  const bool as_root = ::geteuid() == 0;

  sandbox_result result;
  result.sandboxed = sandboxed;
  exec_plan plan;
  unique_fd seccomp_fd;
  if (sandboxed) {
    if (::access(options_.bwrap.c_str(), X_OK) != 0) {
      co_return not_run(fmt::format("the sandbox needs bubblewrap at {}, which is missing (apt-get "
                                    "install bubblewrap)",
                                    options_.bwrap.string()),
                        true);
    }
    auto filter = detail::build_seccomp_filter();
    if (!filter) {
      co_return not_run("cannot build the seccomp filter: " + filter.error().message, true);
    }
    seccomp_fd = lift(*filter);
    auto& a = plan.argv_storage;
    a = {options_.bwrap.string(),
         "--unshare-all",
         "--die-with-parent",
         "--new-session",
         "--cap-drop",
         "ALL",
         "--hostname",
         "sandbox",
         "--ro-bind",
         "/usr",
         "/usr",
         "--symlink",
         "usr/lib",
         "/lib",
         "--symlink",
         "usr/lib64",
         "/lib64",
         "--symlink",
         "usr/bin",
         "/bin",
         "--symlink",
         "usr/sbin",
         "/sbin"};
    for (const auto& path : options_.read_only_paths) {
      a.insert(a.end(), {"--ro-bind-try", path.string(), path.string()});
    }
    if (as_root) {
      plan.reach_source = workspace.string();
    }
    if (!read_only_dir.empty()) {
      if (as_root) {
        plan.reach_read_only_source = read_only_dir.string();
      }
      a.insert(a.end(),
               {"--ro-bind", as_root ? std::string(reach_read_only_point) : read_only_dir.string(),
                request.read_only_target});
    }
    a.insert(a.end(), {"--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev", "--bind",
                       as_root ? std::string(reach_mount_point) : workspace.string(), "/work",
                       "--chdir", "/work", "--seccomp", std::to_string(child_seccomp_fd),
                       "--json-status-fd", std::to_string(child_status_fd), "--"});
    a.insert(a.end(), request.argv.begin(), request.argv.end());
    result.limits_in_force.insert(result.limits_in_force.end(),
                                  {"namespaces=user,pid,net,ipc,uts,mount", "seccomp"});
  } else {
    plan.argv_storage = request.argv;
    plan.chdir_to = workspace.string();
  }
  const std::string home = sandboxed ? "/work" : workspace.string();
  plan.env_storage = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "TMPDIR=/tmp",
                      "LANG=C.UTF-8", "MPLCONFIGDIR=/tmp", "MPLBACKEND=Agg",
                      "OPENBLAS_NUM_THREADS=1", "PYTHONDONTWRITEBYTECODE=1",
                      // Caches (fontconfig, pip, …) go to the private /tmp, not the workspace.
                      "XDG_CACHE_HOME=/tmp/.cache", "XDG_CONFIG_HOME=/tmp/.config"};
  for (const auto& [name, value] : request.env) {
    if (!valid_env_name(name)) {
      co_return not_run(fmt::format("environment variable name '{}' is not valid", name),
                        sandboxed);
    }
    plan.env_storage.push_back(name + "=" + value);
  }
  if (plan.argv_storage[0].find('/') == std::string::npos) {
    // execve needs a path; the sandbox's own PATH is searched by bwrap for its payload,
    // but on the host the command must be resolved here.
    plan.argv_storage[0] = "/usr/bin/" + plan.argv_storage[0];
  }

  const auto address_space_mb =
      limits.address_space_mb ? limits.address_space_mb : limits.memory_mb;
  plan.address_space = static_cast<rlim_t>(address_space_mb) * 1024 * 1024;
  plan.cpu_seconds = static_cast<rlim_t>(
      std::chrono::duration_cast<std::chrono::seconds>(limits.timeout).count() + 1);
  plan.file_size = static_cast<rlim_t>(limits.max_file_bytes);
  // RLIMIT_NPROC counts every process of the uid, across concurrent runs: a generous
  // backstop; the per-run cap is the cgroup's pids.max.
  plan.processes = static_cast<rlim_t>(std::max(1024u, limits.max_processes * 16));
  plan.drop_privileges = as_root;
  plan.uid = options_.uid;
  plan.gid = options_.gid;
  result.limits_in_force.push_back(fmt::format("rlimit_as={}MiB", address_space_mb));
  result.limits_in_force.push_back(fmt::format("rlimit_cpu={}s", plan.cpu_seconds));
  result.limits_in_force.push_back(fmt::format("rlimit_fsize={}", plan.file_size));
  result.limits_in_force.push_back(fmt::format("rlimit_nproc={}", plan.processes));
  if (as_root) {
    // The unprivileged uid must be able to write its workspace.
    if (::chown(workspace.c_str(), options_.uid, options_.gid) != 0) {
      co_return not_run(fmt::format("cannot hand the workspace to uid {}: {}", options_.uid,
                                    std::strerror(errno)),
                        sandboxed);
    }
    result.limits_in_force.push_back(fmt::format("uid={}", options_.uid));
  }

  detail::cgroup_v1 group(options_.cgroup_root,
                          fmt::format("run-{}-{}", ::getpid(), run_counter.fetch_add(1)));
  if (group.limit_pids(limits.max_processes)) {
    result.limits_in_force.push_back(fmt::format("cgroup_pids={}", limits.max_processes));
  }
  if (group.limit_memory(limits.memory_mb * 1024 * 1024)) {
    result.limits_in_force.push_back(fmt::format("cgroup_memory={}MiB", limits.memory_mb));
  }
  plan.cgroup_tasks = group.tasks_files();

  auto in = make_pipe();
  auto out = make_pipe();
  auto err = make_pipe();
  auto status = make_pipe();
  if (!in || !out || !err || !status) {
    co_return not_run("cannot create pipes", sandboxed);
  }
  plan.stdin_fd = in->read.get();
  plan.stdout_fd = out->write.get();
  plan.stderr_fd = err->write.get();
  plan.seccomp_fd = seccomp_fd.get();
  plan.status_fd = sandboxed ? status->write.get() : -1;
  plan.freeze();

  const pid_t pid = spawn_child(plan);
  if (pid < 0) {
    co_return not_run(fmt::format("cannot start a process: {}", std::strerror(errno)), sandboxed);
  }
  track(pid, true);
  in->read.reset();
  out->write.reset();
  err->write.reset();
  status->write.reset();
  seccomp_fd.reset();

  auto executor = co_await asio::this_coro::executor;
  auto state = std::make_shared<run_state>(executor);
  state->out.cap = limits.output_cap_bytes;
  state->err.cap = limits.output_cap_bytes;
  state->out_pipe.assign(out->read.release());
  state->err_pipe.assign(err->read.release());
  state->in_pipe.assign(in->write.release());
  asio::co_spawn(executor, feed_stdin(state, std::move(request.stdin_data)), asio::detached);

  const int raw_pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  asio::posix::stream_descriptor pidfd(executor);
  if (raw_pidfd >= 0) {
    pidfd.assign(raw_pidfd);
  }
  const std::function<void()> kill_tree = [pid, &group] {
    ::kill(pid, SIGKILL);
    ::kill(-pid, SIGKILL);
    group.kill_pass();
  };

  // Read both pipes to their end while supervising the process: on the deadline the
  // tree is killed; after the exit, stragglers are killed so the pipes close. A pipe held
  // open by something unkillable is abandoned a few seconds after the deadline.
  const auto deadline = started + limits.timeout;
  auto exit = std::make_shared<exit_info>();
  co_await ((read_capped(state, true) && read_capped(state, false) &&
             supervise(pid, &pidfd, deadline, kill_tree, exit)) ||
            sleep_until(deadline + std::chrono::seconds(5)));
  const auto cancel_state = co_await asio::this_coro::cancellation_state;
  if (cancel_state.cancelled() != asio::cancellation_type::none) {
    result.cancelled = true;
    co_await asio::this_coro::reset_cancellation_state();
  }
  result.timed_out = exit->timed_out;
  int wait_status = exit->status;
  if (!exit->reaped) {
    // Cancelled, or abandoned at the backstop: end the tree and collect its status.
    if (!result.cancelled) {
      result.timed_out = true;
    }
    kill_tree();
    co_await (wait_readable(pidfd) || sleep_until(steady_clock::now() + std::chrono::seconds(5)));
    ::waitpid(pid, &wait_status, 0);
  }
  track(pid, false);
  const auto status_text = sandboxed ? read_available(status->read.get()) : std::string{};
  // Reap what the run left re-parented to troupe, then make sure its cgroups are empty:
  // both normally hold at the first look, so no time is spent waiting here.
  const auto cleanup_deadline = steady_clock::now() + std::chrono::milliseconds(500);
  asio::steady_timer pause(executor);
  if (sandboxed) {
    co_await reap_sandbox_init(status_field(status_text, "child-pid").value_or(0),
                               cleanup_deadline);
  } else {
    while (reap_orphans() > 0 && steady_clock::now() < cleanup_deadline) {
      pause.expires_after(std::chrono::milliseconds(1));
      co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
    }
  }
  while (group.kill_pass() > 0 && steady_clock::now() < cleanup_deadline) {
    pause.expires_after(std::chrono::milliseconds(1));
    co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  boost::system::error_code ignored;
  state->out_pipe.close(ignored);
  state->err_pipe.close(ignored);
  state->in_pipe.close(ignored);

  result.duration =
      std::chrono::duration_cast<std::chrono::milliseconds>(steady_clock::now() - started);
  result.stdout_text = std::move(state->out.text);
  result.stderr_text = std::move(state->err.text);
  result.stdout_bytes = state->out.total;
  result.stderr_bytes = state->err.total;
  if (state->out.total > result.stdout_text.size()) {
    result.stdout_truncated = true;
    result.stdout_text += truncation_marker(state->out.total - result.stdout_text.size());
  }
  if (state->err.total > result.stderr_text.size()) {
    result.stderr_truncated = true;
    result.stderr_text += truncation_marker(state->err.total - result.stderr_text.size());
  }
  if (sandboxed && !status_field(status_text, "child-pid") && !result.timed_out &&
      !result.cancelled) {
    auto failed = not_run(
        "the sandbox could not be set up: " +
            (result.stderr_text.empty() ? std::string("bubblewrap failed") : result.stderr_text),
        true);
    failed.limits_in_force = std::move(result.limits_in_force);
    failed.duration = result.duration;
    co_return failed;
  }
  if (result.timed_out) {
    result.exit_code = exit_timed_out;
  } else if (auto code = status_field(status_text, "exit-code")) {
    result.exit_code = *code;
  } else if (WIFEXITED(wait_status)) {
    result.exit_code = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    result.exit_code = 128 + WTERMSIG(wait_status);
  }
  if (group.oom_killed()) {
    result.error = "the memory limit was reached";
  }
  co_return result;
}

} // namespace troupe::tools
