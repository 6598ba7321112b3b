#pragma once

// One write per commit into the write-ahead log, instead of two per page.
//
// SQLite appends a commit to the WAL as a 24-byte frame header and a page for every page
// the transaction changed, each its own pwrite: ~30 system calls for a one-round chat's
// commit, a noticeable share of the store writer's time on a VM where every system call
// is costly. The frames of one commit are contiguous, so the `troupe-wal-buffer` VFS
// (a shim over the default one, used by the writer's connection only) gathers
// consecutive writes to a `-wal` file in memory and writes them at once.
//
// Other connections must never see a frame the writer has not written. A commit becomes
// visible when the writer publishes the new WAL-index header, after its frames; the shim
// recognises the commit's last frame by its header (bytes 4-7, the database size after
// the commit, are non-zero only there: the WAL file format) and writes everything out
// right after that frame's page, inside the xWrite call, so a failed write fails the
// commit as it would without the shim. A commit header that follows no gathered frame
// (a one-page commit, or a header SQLite rewrites in place with new checksums after a
// transaction overwrote its own frames) is written at once. Frames of a transaction too
// large for the page cache (written before its commit) wait in memory up to 1 MiB. The
// gathered bytes go out in pieces of 120 KiB: the unix VFS writes at most 128 KiB - 1 per
// call. Anything that reads, sizes, syncs, truncates, maps or closes the log, and a write
// that does not continue the gathered bytes, writes them out first.

#include <cstdint>

namespace troupe::storage {

/// The name of the VFS to pass to sqlite3_open_v2, registered on first use; nullptr when
/// SQLite has no default VFS to wrap (the caller then opens with the default).
const char* wal_write_buffer_vfs() noexcept;

struct wal_write_buffer_stats {
  std::uint64_t writes_gathered = 0; ///< xWrite calls on a -wal file through the shim
  std::uint64_t writes_issued = 0;   ///< writes the shim made to the file for them
};

/// Process-wide counters of the shim (for tests and diagnostics).
wal_write_buffer_stats wal_write_buffer_counters() noexcept;

} // namespace troupe::storage
