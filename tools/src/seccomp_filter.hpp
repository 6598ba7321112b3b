#pragma once

// Private to troupe_tools: the seccomp filter loaded by bubblewrap into the sandbox.

#include "troupe/runtime/error.hpp"

namespace troupe::tools::detail {

/// Builds the sandbox's seccomp BPF program into an anonymous memory file and returns
/// its descriptor (positioned at 0, not close-on-exec is left to the caller). The
/// filter allows ordinary system calls and answers EPERM to the ones a sandboxed
/// program never needs and an escape (or a denial of service against troupe) would:
/// ptrace, mount, namespaces, kernel modules, bpf, perf, keyrings, reboot and their kin;
/// mknod/mknodat (no FIFOs or device nodes), io_uring, reaching into other processes,
/// the clock, obsolete calls, TIOCSTI, and personality flags that weaken the address
/// space. The full list, with reasons, is in tools/README.md.
expected<int> build_seccomp_filter();

} // namespace troupe::tools::detail
