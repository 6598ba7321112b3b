#include "seccomp_filter.hpp"

#include <cerrno>
#include <cstring>
#include <memory>

#include <fmt/format.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <unistd.h>

namespace troupe::tools::detail {

namespace {

// Calls that are denied outright.
constexpr const char* denied_calls[] = {
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "swapon",
    "swapoff",
    "reboot",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "unshare",
    "setns",
    "acct",
    "quotactl",
    "syslog",
    "iopl",
    "ioperm",
    "open_by_handle_at",
    "name_to_handle_at",
    "lookup_dcookie",
    "fanotify_init",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "mount_setattr",
    "clone3",
    // Device nodes and FIFOs: a FIFO in the workspace is how a program would make a tool
    // that opens it wait forever (`mkfifo p`, which is mknodat). Nothing a sandboxed
    // program does needs mknod, so it is refused for every file type.
    "mknod",
    "mknodat",
    // io_uring: a second system call interface, which this filter could not inspect.
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    // Reaching into other processes, or the kernel's view of them.
    "kcmp",
    "pidfd_getfd",
    "process_madvise",
    "migrate_pages",
    "move_pages",
    // The clock, the host's identity and accounting: never a program's business.
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "sethostname",
    "setdomainname",
    "vhangup",
    "quotactl_fd",
    // Obsolete or unimplemented calls, kept out so that none can come back to life.
    "uselib",
    "_sysctl",
    "ustat",
    "sysfs",
    "nfsservctl",
    "create_module",
    "get_kernel_syms",
    "query_module",
    "afs_syscall",
    "tuxcall",
    "security",
    "vserver",
    "putpmsg",
    "getpmsg",
};

struct filter_deleter {
  void operator()(scmp_filter_ctx* ctx) const {
    seccomp_release(*ctx);
    delete ctx;
  }
};

} // namespace

namespace {

// Compiles the filter into BPF bytes.
expected<std::string> compile_filter() {
  scmp_filter_ctx raw = seccomp_init(SCMP_ACT_ALLOW);
  if (raw == nullptr) {
    return fail(errc::internal, "seccomp_init failed");
  }
  std::unique_ptr<scmp_filter_ctx, filter_deleter> ctx(new scmp_filter_ctx(raw));
  for (const char* name : denied_calls) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) {
      continue; // not on this architecture
    }
    // clone3 gets ENOSYS so libc falls back to clone, whose flags can be inspected.
    const auto action =
        std::strcmp(name, "clone3") == 0 ? SCMP_ACT_ERRNO(ENOSYS) : SCMP_ACT_ERRNO(EPERM);
    if (const int rc = seccomp_rule_add(*ctx, action, nr, 0); rc != 0) {
      return fail(errc::internal,
                  fmt::format("seccomp rule for {} failed: {}", name, std::strerror(-rc)));
    }
  }
  // clone() may not create namespaces (nested user namespaces are the classic way out):
  // one rule per flag, each matching when that bit is set in the flags argument.
  for (const scmp_datum_t flag : {CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID,
                                  CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP}) {
    if (const int rc = seccomp_rule_add(*ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                        SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
        rc != 0) {
      return fail(errc::internal,
                  fmt::format("seccomp rule for clone failed: {}", std::strerror(-rc)));
    }
  }
  // ioctl(TIOCSTI) pushes characters into a terminal's input and TIOCLINUX reaches the
  // console: the sandbox has no terminal (its own session, pipes for stdio), and neither
  // may work if one leaked in. Compared on the low 32 bits, which is what the kernel reads.
  for (const scmp_datum_t request : {scmp_datum_t{TIOCSTI}, scmp_datum_t{TIOCLINUX}}) {
    if (const int rc = seccomp_rule_add(*ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                                        SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, request));
        rc != 0) {
      return fail(errc::internal,
                  fmt::format("seccomp rule for ioctl failed: {}", std::strerror(-rc)));
    }
  }
  // personality() may not turn off address-space randomisation or make data executable.
  for (const scmp_datum_t flag :
       {scmp_datum_t{ADDR_NO_RANDOMIZE}, scmp_datum_t{READ_IMPLIES_EXEC}}) {
    if (const int rc = seccomp_rule_add(*ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
                                        SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
        rc != 0) {
      return fail(errc::internal,
                  fmt::format("seccomp rule for personality failed: {}", std::strerror(-rc)));
    }
  }
  const int fd = ::memfd_create("troupe-seccomp-build", MFD_CLOEXEC);
  if (fd < 0) {
    return fail(errc::io_error, fmt::format("memfd_create failed: {}", std::strerror(errno)));
  }
  if (const int rc = seccomp_export_bpf(*ctx, fd); rc != 0) {
    ::close(fd);
    return fail(errc::internal, fmt::format("seccomp_export_bpf failed: {}", std::strerror(-rc)));
  }
  std::string program(static_cast<std::size_t>(::lseek(fd, 0, SEEK_END)), '\0');
  const auto n = ::pread(fd, program.data(), program.size(), 0);
  ::close(fd);
  if (n != static_cast<ssize_t>(program.size())) {
    return fail(errc::io_error, "cannot read back the seccomp program");
  }
  return program;
}

} // namespace

expected<int> build_seccomp_filter() {
  // The program is the same for every run: compile it once.
  static const expected<std::string> program = compile_filter();
  if (!program) {
    return tl::unexpected(program.error());
  }
  const int fd = ::memfd_create("troupe-seccomp", 0);
  if (fd < 0) {
    return fail(errc::io_error, fmt::format("memfd_create failed: {}", std::strerror(errno)));
  }
  if (::write(fd, program->data(), program->size()) != static_cast<ssize_t>(program->size())) {
    ::close(fd);
    return fail(errc::io_error, "cannot write the seccomp program");
  }
  ::lseek(fd, 0, SEEK_SET);
  return fd;
}

} // namespace troupe::tools::detail
