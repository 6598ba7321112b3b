#include "troupe/storage/wal_write_buffer.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <new>
#include <string>

namespace troupe::storage {

namespace {

constexpr const char* shim_name = "troupe-wal-buffer";
constexpr std::size_t frame_header_bytes = 24;
constexpr sqlite3_int64 wal_header_bytes = 32;
constexpr std::size_t max_gathered = std::size_t{1} << 20;
constexpr std::size_t max_piece = 120 * 1024;

std::atomic<std::uint64_t> writes_gathered{0};
std::atomic<std::uint64_t> writes_issued{0};

sqlite3_vfs* inner_vfs = nullptr; // the default VFS when the shim was registered
sqlite3_vfs shim_vfs{};
sqlite3_io_methods wal_methods{};

// What SQLite sees for a -wal file opened through the shim. The wrapped VFS's own file
// object follows it in the same allocation (SQLite allocates szOsFile bytes).
struct wal_file {
  sqlite3_file base; // first: SQLite casts between the two
  sqlite3_file* real = nullptr;
  std::string gathered;          // bytes not yet written, contiguous from `offset`
  sqlite3_int64 offset = 0;      // file offset of gathered[0]
  bool write_after_next = false; // the last write was a commit frame's header
};

constexpr std::size_t real_offset() {
  constexpr std::size_t align = alignof(std::max_align_t);
  return (sizeof(wal_file) + align - 1) / align * align;
}

wal_file* as_wal(sqlite3_file* f) {
  return reinterpret_cast<wal_file*>(f);
}

int write_out(wal_file& w) {
  int rc = SQLITE_OK;
  // The unix VFS writes at most 128 KiB - 1 per call (it masks the length with 0x1ffff).
  for (std::size_t done = 0; done < w.gathered.size() && rc == SQLITE_OK;) {
    const auto piece = std::min(w.gathered.size() - done, max_piece);
    rc = w.real->pMethods->xWrite(w.real, w.gathered.data() + done, static_cast<int>(piece),
                                  w.offset + static_cast<sqlite3_int64>(done));
    writes_issued.fetch_add(1, std::memory_order_relaxed);
    done += piece;
  }
  // On failure the bytes are dropped: SQLite fails the transaction and writes its frames
  // again from its own pages if it retries.
  w.gathered.clear();
  return rc;
}

// A frame header whose "database size after commit" field is set ends a transaction.
bool is_commit_frame_header(const void* data, int amount, sqlite3_int64 offset) {
  if (amount != static_cast<int>(frame_header_bytes) || offset < wal_header_bytes) {
    return false;
  }
  unsigned char size_after_commit[4];
  std::memcpy(size_after_commit, static_cast<const unsigned char*>(data) + 4, 4);
  return (size_after_commit[0] | size_after_commit[1] | size_after_commit[2] |
          size_after_commit[3]) != 0;
}

// Writes the gathered bytes out, then lets the wrapped file do `forward`.
template <class Forward> int after_write_out(sqlite3_file* f, Forward forward) {
  auto* w = as_wal(f);
  if (const int rc = write_out(*w); rc != SQLITE_OK) {
    return rc;
  }
  return forward(w->real);
}

int wal_close(sqlite3_file* f) {
  auto* w = as_wal(f);
  const int flushed = write_out(*w);
  const int closed = w->real->pMethods != nullptr ? w->real->pMethods->xClose(w->real) : SQLITE_OK;
  w->~wal_file();
  return flushed != SQLITE_OK ? flushed : closed;
}

int wal_read(sqlite3_file* f, void* data, int amount, sqlite3_int64 offset) {
  return after_write_out(
      f, [&](sqlite3_file* real) { return real->pMethods->xRead(real, data, amount, offset); });
}

int wal_write(sqlite3_file* f, const void* data, int amount, sqlite3_int64 offset) {
  auto* w = as_wal(f);
  writes_gathered.fetch_add(1, std::memory_order_relaxed);
  const bool continues =
      !w->gathered.empty() && offset == w->offset + static_cast<sqlite3_int64>(w->gathered.size());
  const bool commit_header = is_commit_frame_header(data, amount, offset);
  if (!w->gathered.empty() &&
      (!continues || w->gathered.size() + static_cast<std::size_t>(amount) > max_gathered)) {
    if (const int rc = write_out(*w); rc != SQLITE_OK) {
      w->write_after_next = false;
      return rc;
    }
  }
  if (commit_header && !continues) {
    // A commit frame's header that follows no gathered frame: a one-page commit, or a
    // header rewritten in place with new checksums (a transaction that overwrote its own
    // frames), after which nothing may follow before SQLite publishes the commit. It goes
    // out now; the page after it, if any, right after that page.
    w->write_after_next = true;
    writes_issued.fetch_add(1, std::memory_order_relaxed);
    return w->real->pMethods->xWrite(w->real, data, amount, offset);
  }
  if (w->gathered.empty()) {
    w->offset = offset;
  }
  w->gathered.append(static_cast<const char*>(data), static_cast<std::size_t>(amount));
  if (w->write_after_next) {
    // The commit frame's page: the whole transaction goes to the file now, before SQLite
    // publishes it in the WAL index.
    w->write_after_next = false;
    return write_out(*w);
  }
  w->write_after_next = commit_header;
  return SQLITE_OK;
}

int wal_truncate(sqlite3_file* f, sqlite3_int64 size) {
  return after_write_out(f,
                         [&](sqlite3_file* real) { return real->pMethods->xTruncate(real, size); });
}

int wal_sync(sqlite3_file* f, int flags) {
  return after_write_out(f, [&](sqlite3_file* real) { return real->pMethods->xSync(real, flags); });
}

int wal_file_size(sqlite3_file* f, sqlite3_int64* size) {
  return after_write_out(f,
                         [&](sqlite3_file* real) { return real->pMethods->xFileSize(real, size); });
}

int wal_lock(sqlite3_file* f, int level) {
  auto* w = as_wal(f);
  return w->real->pMethods->xLock(w->real, level);
}

int wal_unlock(sqlite3_file* f, int level) {
  auto* w = as_wal(f);
  return w->real->pMethods->xUnlock(w->real, level);
}

int wal_check_reserved_lock(sqlite3_file* f, int* out) {
  auto* w = as_wal(f);
  return w->real->pMethods->xCheckReservedLock(w->real, out);
}

int wal_file_control(sqlite3_file* f, int op, void* arg) {
  return after_write_out(
      f, [&](sqlite3_file* real) { return real->pMethods->xFileControl(real, op, arg); });
}

int wal_sector_size(sqlite3_file* f) {
  auto* w = as_wal(f);
  return w->real->pMethods->xSectorSize(w->real);
}

int wal_device_characteristics(sqlite3_file* f) {
  auto* w = as_wal(f);
  return w->real->pMethods->xDeviceCharacteristics(w->real);
}

int wal_shm_map(sqlite3_file* f, int page, int page_size, int extend, void volatile** out) {
  auto* w = as_wal(f);
  return w->real->pMethods->xShmMap(w->real, page, page_size, extend, out);
}

int wal_shm_lock(sqlite3_file* f, int offset, int n, int flags) {
  auto* w = as_wal(f);
  return w->real->pMethods->xShmLock(w->real, offset, n, flags);
}

void wal_shm_barrier(sqlite3_file* f) {
  auto* w = as_wal(f);
  w->real->pMethods->xShmBarrier(w->real);
}

int wal_shm_unmap(sqlite3_file* f, int delete_flag) {
  auto* w = as_wal(f);
  return w->real->pMethods->xShmUnmap(w->real, delete_flag);
}

int wal_fetch(sqlite3_file* f, sqlite3_int64 offset, int amount, void** out) {
  return after_write_out(
      f, [&](sqlite3_file* real) { return real->pMethods->xFetch(real, offset, amount, out); });
}

int wal_unfetch(sqlite3_file* f, sqlite3_int64 offset, void* p) {
  auto* w = as_wal(f);
  return w->real->pMethods->xUnfetch(w->real, offset, p);
}

int shim_open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* file, int flags, int* out_flags) {
  if ((flags & SQLITE_OPEN_WAL) == 0) {
    // Everything but the log is the wrapped VFS's own file, in the same memory.
    return inner_vfs->xOpen(inner_vfs, name, file, flags, out_flags);
  }
  auto* w = new (file) wal_file{};
  w->base.pMethods = nullptr;
  w->real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) + real_offset());
  std::memset(w->real, 0, static_cast<std::size_t>(inner_vfs->szOsFile));
  const int rc = inner_vfs->xOpen(inner_vfs, name, w->real, flags, out_flags);
  if (rc != SQLITE_OK || w->real->pMethods == nullptr) {
    if (w->real->pMethods != nullptr) {
      w->real->pMethods->xClose(w->real);
    }
    w->~wal_file();
    file->pMethods = nullptr; // SQLite does not call xClose on a file that failed to open
    return rc != SQLITE_OK ? rc : SQLITE_CANTOPEN;
  }
  w->base.pMethods = &wal_methods;
  return SQLITE_OK;
}

// The rest of the VFS is the wrapped one's.
int shim_delete(sqlite3_vfs*, const char* name, int sync_dir) {
  return inner_vfs->xDelete(inner_vfs, name, sync_dir);
}
int shim_access(sqlite3_vfs*, const char* name, int flags, int* out) {
  return inner_vfs->xAccess(inner_vfs, name, flags, out);
}
int shim_full_pathname(sqlite3_vfs*, const char* name, int size, char* out) {
  return inner_vfs->xFullPathname(inner_vfs, name, size, out);
}
void* shim_dl_open(sqlite3_vfs*, const char* name) {
  return inner_vfs->xDlOpen(inner_vfs, name);
}
void shim_dl_error(sqlite3_vfs*, int size, char* out) {
  inner_vfs->xDlError(inner_vfs, size, out);
}
void (*shim_dl_sym(sqlite3_vfs*, void* handle, const char* symbol))(void) {
  return inner_vfs->xDlSym(inner_vfs, handle, symbol);
}
void shim_dl_close(sqlite3_vfs*, void* handle) {
  inner_vfs->xDlClose(inner_vfs, handle);
}
int shim_randomness(sqlite3_vfs*, int size, char* out) {
  return inner_vfs->xRandomness(inner_vfs, size, out);
}
int shim_sleep(sqlite3_vfs*, int microseconds) {
  return inner_vfs->xSleep(inner_vfs, microseconds);
}
int shim_current_time(sqlite3_vfs*, double* out) {
  return inner_vfs->xCurrentTime(inner_vfs, out);
}
int shim_get_last_error(sqlite3_vfs*, int size, char* out) {
  return inner_vfs->xGetLastError != nullptr ? inner_vfs->xGetLastError(inner_vfs, size, out) : 0;
}
int shim_current_time_int64(sqlite3_vfs*, sqlite3_int64* out) {
  return inner_vfs->xCurrentTimeInt64(inner_vfs, out);
}

const char* register_shim() noexcept {
  inner_vfs = sqlite3_vfs_find(nullptr);
  // The forwarding below needs the default (unix) VFS's version 3 methods.
  if (inner_vfs == nullptr || inner_vfs->iVersion < 2 || inner_vfs->xCurrentTimeInt64 == nullptr) {
    return nullptr;
  }
  wal_methods.iVersion = 3;
  wal_methods.xClose = wal_close;
  wal_methods.xRead = wal_read;
  wal_methods.xWrite = wal_write;
  wal_methods.xTruncate = wal_truncate;
  wal_methods.xSync = wal_sync;
  wal_methods.xFileSize = wal_file_size;
  wal_methods.xLock = wal_lock;
  wal_methods.xUnlock = wal_unlock;
  wal_methods.xCheckReservedLock = wal_check_reserved_lock;
  wal_methods.xFileControl = wal_file_control;
  wal_methods.xSectorSize = wal_sector_size;
  wal_methods.xDeviceCharacteristics = wal_device_characteristics;
  wal_methods.xShmMap = wal_shm_map;
  wal_methods.xShmLock = wal_shm_lock;
  wal_methods.xShmBarrier = wal_shm_barrier;
  wal_methods.xShmUnmap = wal_shm_unmap;
  wal_methods.xFetch = wal_fetch;
  wal_methods.xUnfetch = wal_unfetch;

  shim_vfs.iVersion = 2;
  shim_vfs.szOsFile = static_cast<int>(real_offset()) + inner_vfs->szOsFile;
  shim_vfs.mxPathname = inner_vfs->mxPathname;
  shim_vfs.zName = shim_name;
  shim_vfs.xOpen = shim_open;
  shim_vfs.xDelete = shim_delete;
  shim_vfs.xAccess = shim_access;
  shim_vfs.xFullPathname = shim_full_pathname;
  shim_vfs.xDlOpen = shim_dl_open;
  shim_vfs.xDlError = shim_dl_error;
  shim_vfs.xDlSym = shim_dl_sym;
  shim_vfs.xDlClose = shim_dl_close;
  shim_vfs.xRandomness = shim_randomness;
  shim_vfs.xSleep = shim_sleep;
  shim_vfs.xCurrentTime = shim_current_time;
  shim_vfs.xGetLastError = shim_get_last_error;
  shim_vfs.xCurrentTimeInt64 = shim_current_time_int64;
  if (sqlite3_vfs_register(&shim_vfs, 0) != SQLITE_OK) {
    return nullptr;
  }
  return shim_name;
}

} // namespace

const char* wal_write_buffer_vfs() noexcept {
  static const char* const name = register_shim();
  return name;
}

wal_write_buffer_stats wal_write_buffer_counters() noexcept {
  return {writes_gathered.load(std::memory_order_relaxed),
          writes_issued.load(std::memory_order_relaxed)};
}

} // namespace troupe::storage
