#pragma once

/// \file
/// A thin, safe layer over the SQLite C API: an RAII connection with a prepared-statement
/// cache, RAII statements with typed binds and reads, and transactions. Every SQLite
/// failure becomes a `troupe::error` carrying the SQL and SQLite's own message.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "troupe/runtime/error.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace troupe::storage {

/// Converts an SQLite result code into troupe's vocabulary (constraint -> conflict, busy
/// -> unavailable, I/O and corruption -> io_error, …).
errc errc_from_sqlite(int rc) noexcept;

/// A prepared statement. Statements from `connection::prepare` are borrowed from the
/// connection's cache: destroying one resets it and clears its bindings for reuse.
/// Binding indexes start at 1, column indexes at 0 (as in SQLite).
class statement {
public:
  statement() = default;
  /// Takes `stmt`; when `in_use` is set the statement is borrowed from a cache whose
  /// flag it clears when destroyed, instead of finalizing it.
  statement(sqlite3_stmt* stmt, bool* in_use) noexcept : stmt_(stmt), in_use_(in_use) {}
  statement(statement&& other) noexcept;
  statement& operator=(statement&& other) noexcept;
  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;
  ~statement();

  expected<void> bind(int index, std::int64_t value);
  expected<void> bind(int index, int value) {
    return bind(index, static_cast<std::int64_t>(value));
  }
  expected<void> bind(int index, bool value) {
    return bind(index, static_cast<std::int64_t>(value ? 1 : 0));
  }
  expected<void> bind(int index, double value);
  expected<void> bind(int index, std::string_view value);
  expected<void> bind(int index, const std::string& value) {
    return bind(index, std::string_view(value));
  }
  expected<void> bind(int index, const char* value) {
    return bind(index, std::string_view(value));
  }
  expected<void> bind(int index, std::nullptr_t);
  template <class T> expected<void> bind(int index, const std::optional<T>& value) {
    if (!value) {
      return bind(index, nullptr);
    }
    return bind(index, *value);
  }

  /// Binds each argument in order, starting at index 1.
  template <class... Ts> expected<void> bind_all(const Ts&... values) {
    int index = 0;
    expected<void> result;
    ((result ? (result = bind(++index, values), 0) : 0), ...);
    return result;
  }

  /// Advances: true when a row is available, false when the statement is done.
  expected<bool> step();

  /// Steps to completion, ignoring any rows (INSERT, UPDATE, DELETE, DDL).
  expected<void> run();

  std::int64_t int64(int column) const noexcept;
  double real(int column) const noexcept;
  std::string text(int column) const;
  bool is_null(int column) const noexcept;
  std::optional<std::int64_t> optional_int64(int column) const noexcept;

  /// The SQL this statement was prepared from.
  std::string_view sql() const noexcept;

  explicit operator bool() const noexcept {
    return stmt_ != nullptr;
  }

private:
  error make_error(int rc) const;

  sqlite3_stmt* stmt_ = nullptr;
  bool* in_use_ = nullptr;
};

/// How SQLite syncs the WAL to disk at commit.
enum class sync_mode {
  /// WAL + NORMAL: a commit survives a process crash (SIGKILL); the last commits may be
  /// lost on power failure or an OS crash. The default.
  normal,
  /// WAL + FULL: the WAL is fsynced at every commit; survives power loss too.
  full,
};

/// Parses "normal" or "full".
expected<sync_mode> parse_sync_mode(std::string_view text);

/// How a connection is opened.
struct connection_options {
  bool read_only = false;
  sync_mode sync = sync_mode::normal;
  /// How long a statement waits for a lock held by another connection.
  int busy_timeout_ms = 5000;
  /// Write each commit's WAL frames with one system call instead of two per page (the
  /// `troupe-wal-buffer` VFS, troupe/storage/wal_write_buffer.hpp). For the connection that
  /// writes; a read-only connection never writes the log.
  bool gather_wal_writes = false;
};

/// One SQLite connection: WAL, foreign keys on, a busy timeout, and a cache of prepared
/// statements keyed by their SQL text. Not thread-safe: one thread uses it at a time.
class connection {
public:
  connection() = default;
  connection(connection&& other) noexcept;
  connection& operator=(connection&& other) noexcept;
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
  ~connection();

  /// Opens (creating it unless read-only) the database file at `path`.
  static expected<connection> open(const std::filesystem::path& path,
                                   const connection_options& options = {});

  /// Runs one or more SQL statements that return no rows of interest.
  expected<void> exec(std::string_view sql);

  /// A statement from the cache (prepared on first use). Only one statement per SQL text
  /// may be in use at a time; a second concurrent use gets a fresh, uncached statement.
  expected<statement> prepare(std::string_view sql);

  /// Runs `sql` with `args` bound and returns the first column of the first row as an
  /// integer (`not_found` when there is no row).
  template <class... Ts> expected<std::int64_t> query_int(std::string_view sql, const Ts&... args) {
    auto st = prepare(sql);
    if (!st) {
      return tl::unexpected(st.error());
    }
    if (auto b = st->bind_all(args...); !b) {
      return tl::unexpected(b.error());
    }
    auto row = st->step();
    if (!row) {
      return tl::unexpected(row.error());
    }
    if (!*row) {
      return fail(errc::not_found, "no row for: " + std::string(sql));
    }
    return st->int64(0);
  }

  /// Runs `sql` with `args` bound, to completion.
  template <class... Ts> expected<void> run(std::string_view sql, const Ts&... args) {
    auto st = prepare(sql);
    if (!st) {
      return tl::unexpected(st.error());
    }
    if (auto b = st->bind_all(args...); !b) {
      return b;
    }
    return st->run();
  }

  /// Rowid of the last successful INSERT on this connection.
  std::int64_t last_insert_id() const noexcept;
  /// Rows changed by the last INSERT, UPDATE or DELETE.
  std::int64_t changes() const noexcept;
  /// Whether an explicit transaction is open.
  bool in_transaction() const noexcept;
  /// Whether this connection was opened read-only.
  bool read_only() const noexcept {
    return read_only_;
  }
  const std::filesystem::path& path() const noexcept {
    return path_;
  }
  /// Statements currently held in the cache.
  std::size_t cached_statements() const noexcept {
    return cache_.size();
  }

  /// Whether this SQLite library has FTS5 compiled in.
  static bool fts5_available() noexcept;

  /// Whether the main schema has a table (or virtual table) named `name`: looked up in
  /// the connection's parsed schema, without preparing a statement (a hot path asks it
  /// on every call). A table another connection created is seen once this connection's
  /// next statement has noticed the schema change.
  bool has_table(const std::string& name) const noexcept;

  sqlite3* native_handle() const noexcept {
    return db_;
  }

  /// Calls `hook(frames)` after every commit of this (WAL-mode) connection, with the
  /// number of frames the WAL now holds. Replaces SQLite's automatic checkpoint: once a
  /// hook is set, this connection never checkpoints by itself (see wal_checkpointer).
  void on_wal_commit(std::function<void(int frames)> hook);

private:
  struct cache_entry {
    sqlite3_stmt* stmt = nullptr;
    bool in_use = false;
  };
  void close() noexcept;

  sqlite3* db_ = nullptr;
  bool read_only_ = false;
  std::filesystem::path path_;
  std::unordered_map<std::string, cache_entry> cache_;
  // Heap-held so that its address, which SQLite keeps, survives a move of the connection.
  std::unique_ptr<std::function<void(int)>> wal_hook_;
};

/// An explicit transaction, rolled back when destroyed unless committed. `begin`
/// takes the write lock at once (BEGIN IMMEDIATE) so a writer never fails mid-way on a
/// lock upgrade.
class transaction {
public:
  static expected<transaction> begin(connection& conn);
  transaction(transaction&& other) noexcept : conn_(std::exchange(other.conn_, nullptr)) {}
  transaction& operator=(transaction&&) = delete;
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;
  ~transaction();

  expected<void> commit();
  expected<void> rollback();

private:
  explicit transaction(connection* conn) : conn_(conn) {}
  connection* conn_ = nullptr;
};

/// Runs `body(conn)` inside a transaction; commits when it succeeds, rolls back when it
/// returns an error.
template <class F> auto in_transaction(connection& conn, F&& body) -> decltype(body(conn)) {
  auto tx = transaction::begin(conn);
  if (!tx) {
    return tl::unexpected(tx.error());
  }
  auto result = body(conn);
  if (!result) {
    (void)tx->rollback();
    return result;
  }
  if (auto c = tx->commit(); !c) {
    return tl::unexpected(c.error());
  }
  return result;
}

} // namespace troupe::storage
