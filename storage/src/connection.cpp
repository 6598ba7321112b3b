#include "troupe/storage/connection.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <sqlite3.h>

#include "troupe/storage/wal_write_buffer.hpp"

namespace troupe::storage {

errc errc_from_sqlite(int rc) noexcept {
  switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE:
      return errc::ok;
    case SQLITE_CONSTRAINT:
      return errc::conflict;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return errc::unavailable;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return errc::permission_denied;
    case SQLITE_NOTFOUND:
    case SQLITE_CANTOPEN:
      return errc::not_found;
    case SQLITE_TOOBIG:
    case SQLITE_FULL:
      return errc::limit_exceeded;
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
    case SQLITE_ERROR:
      return errc::invalid_argument;
    case SQLITE_IOERR:
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_PROTOCOL:
      return errc::io_error;
    case SQLITE_INTERRUPT:
    case SQLITE_ABORT:
      return errc::cancelled;
    default:
      return errc::internal;
  }
}

namespace {

error sqlite_error(sqlite3* db, int rc, std::string_view sql) {
  const char* message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  return error{errc_from_sqlite(rc), fmt::format("sqlite: {} (code {}) in: {}", message, rc, sql)};
}

} // namespace

// --- statement ---

statement::statement(statement&& other) noexcept
    : stmt_(std::exchange(other.stmt_, nullptr)), in_use_(std::exchange(other.in_use_, nullptr)) {}

statement& statement::operator=(statement&& other) noexcept {
  if (this != &other) {
    this->~statement();
    stmt_ = std::exchange(other.stmt_, nullptr);
    in_use_ = std::exchange(other.in_use_, nullptr);
  }
  return *this;
}

statement::~statement() {
  if (stmt_ == nullptr) {
    return;
  }
  if (in_use_ != nullptr) {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    *in_use_ = false;
  } else {
    sqlite3_finalize(stmt_);
  }
  stmt_ = nullptr;
  in_use_ = nullptr;
}

error statement::make_error(int rc) const {
  return sqlite_error(sqlite3_db_handle(stmt_), rc, sql());
}

expected<void> statement::bind(int index, std::int64_t value) {
  if (const int rc = sqlite3_bind_int64(stmt_, index, value); rc != SQLITE_OK) {
    return tl::unexpected(make_error(rc));
  }
  return {};
}

expected<void> statement::bind(int index, double value) {
  if (const int rc = sqlite3_bind_double(stmt_, index, value); rc != SQLITE_OK) {
    return tl::unexpected(make_error(rc));
  }
  return {};
}

expected<void> statement::bind(int index, std::string_view value) {
  // SQLITE_TRANSIENT: SQLite copies, so the caller's buffer may die before the step. A
  // default-constructed string_view has a null data pointer, which SQLite binds as NULL.
  const char* data = value.data() != nullptr ? value.data() : "";
  const int rc =
      sqlite3_bind_text64(stmt_, index, data, value.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK) {
    return tl::unexpected(make_error(rc));
  }
  return {};
}

expected<void> statement::bind(int index, std::nullptr_t) {
  if (const int rc = sqlite3_bind_null(stmt_, index); rc != SQLITE_OK) {
    return tl::unexpected(make_error(rc));
  }
  return {};
}

expected<bool> statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) {
    return true;
  }
  if (rc == SQLITE_DONE) {
    return false;
  }
  auto err = make_error(rc);
  sqlite3_reset(stmt_);
  return tl::unexpected(std::move(err));
}

expected<void> statement::run() {
  for (;;) {
    auto row = step();
    if (!row) {
      return tl::unexpected(row.error());
    }
    if (!*row) {
      return {};
    }
  }
}

std::int64_t statement::int64(int column) const noexcept {
  return sqlite3_column_int64(stmt_, column);
}

double statement::real(int column) const noexcept {
  return sqlite3_column_double(stmt_, column);
}

std::string statement::text(int column) const {
  const auto* data = sqlite3_column_text(stmt_, column);
  const int size = sqlite3_column_bytes(stmt_, column);
  if (data == nullptr) {
    return {};
  }
  return std::string(reinterpret_cast<const char*>(data), static_cast<std::size_t>(size));
}

bool statement::is_null(int column) const noexcept {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

std::optional<std::int64_t> statement::optional_int64(int column) const noexcept {
  if (is_null(column)) {
    return std::nullopt;
  }
  return int64(column);
}

std::string_view statement::sql() const noexcept {
  const char* text = stmt_ != nullptr ? sqlite3_sql(stmt_) : nullptr;
  return text != nullptr ? std::string_view(text) : std::string_view();
}

// --- connection ---

expected<sync_mode> parse_sync_mode(std::string_view text) {
  if (text == "normal") {
    return sync_mode::normal;
  }
  if (text == "full") {
    return sync_mode::full;
  }
  return fail(errc::invalid_argument,
              fmt::format("'{}' is not a synchronous mode (expected normal or full)", text));
}

connection::connection(connection&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), read_only_(other.read_only_),
      path_(std::move(other.path_)), cache_(std::move(other.cache_)),
      wal_hook_(std::move(other.wal_hook_)) {
  other.cache_.clear();
}

connection& connection::operator=(connection&& other) noexcept {
  if (this != &other) {
    close();
    db_ = std::exchange(other.db_, nullptr);
    read_only_ = other.read_only_;
    path_ = std::move(other.path_);
    cache_ = std::move(other.cache_);
    other.cache_.clear();
    wal_hook_ = std::move(other.wal_hook_);
  }
  return *this;
}

connection::~connection() {
  close();
}

void connection::close() noexcept {
  for (auto& [sql, entry] : cache_) {
    sqlite3_finalize(entry.stmt);
  }
  cache_.clear();
  if (db_ != nullptr) {
    sqlite3_close_v2(db_);
    db_ = nullptr;
  }
}

expected<connection> connection::open(const std::filesystem::path& path,
                                      const connection_options& options) {
  // Memory statistics make every SQLite allocation take a global mutex; troupe does not
  // read them. Only possible before SQLite initializes (else SQLITE_MISUSE, harmless).
  static const int memstatus_off = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  (void)memstatus_off;
  connection conn;
  conn.read_only_ = options.read_only;
  conn.path_ = path;
  const int flags =
      (options.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
      SQLITE_OPEN_NOMUTEX;
  const char* vfs =
      options.gather_wal_writes && !options.read_only ? wal_write_buffer_vfs() : nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &conn.db_, flags, vfs);
  if (rc != SQLITE_OK) {
    auto err = sqlite_error(conn.db_, rc, "open " + path.string());
    return tl::unexpected(std::move(err));
  }
  sqlite3_extended_result_codes(conn.db_, 1);
  sqlite3_busy_timeout(conn.db_, options.busy_timeout_ms);
  std::string pragmas = "PRAGMA foreign_keys = ON;";
  if (!options.read_only) {
    pragmas += "PRAGMA journal_mode = WAL;";
    pragmas += options.sync == sync_mode::full ? "PRAGMA synchronous = FULL;"
                                               : "PRAGMA synchronous = NORMAL;";
  }
  if (auto ok = conn.exec(pragmas); !ok) {
    return tl::unexpected(ok.error());
  }
  return conn;
}

expected<void> connection::exec(std::string_view sql) {
  const std::string text(sql);
  char* message = nullptr;
  const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &message);
  if (rc != SQLITE_OK) {
    error err{errc_from_sqlite(rc),
              fmt::format("sqlite: {} (code {}) in: {}",
                          message != nullptr ? message : sqlite3_errstr(rc), rc, sql)};
    sqlite3_free(message);
    return tl::unexpected(std::move(err));
  }
  return {};
}

expected<statement> connection::prepare(std::string_view sql) {
  auto it = cache_.find(std::string(sql));
  if (it != cache_.end() && !it->second.in_use) {
    it->second.in_use = true;
    return statement(it->second.stmt, &it->second.in_use);
  }
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    return tl::unexpected(sqlite_error(db_, rc, sql));
  }
  if (stmt == nullptr) {
    return fail(errc::invalid_argument, fmt::format("sqlite: empty statement: '{}'", sql));
  }
  if (it != cache_.end()) {
    return statement(stmt, nullptr); // the cached one is busy: a one-off
  }
  auto [pos, inserted] = cache_.emplace(std::string(sql), cache_entry{stmt, true});
  return statement(pos->second.stmt, &pos->second.in_use);
}

void connection::on_wal_commit(std::function<void(int frames)> hook) {
  wal_hook_ = std::make_unique<std::function<void(int)>>(std::move(hook));
  sqlite3_wal_hook(
      db_,
      [](void* arg, sqlite3*, const char*, int frames) -> int {
        (*static_cast<std::function<void(int)>*>(arg))(frames);
        return SQLITE_OK;
      },
      wal_hook_.get());
}

std::int64_t connection::last_insert_id() const noexcept {
  return sqlite3_last_insert_rowid(db_);
}

std::int64_t connection::changes() const noexcept {
  return sqlite3_changes64(db_);
}

bool connection::in_transaction() const noexcept {
  return db_ != nullptr && sqlite3_get_autocommit(db_) == 0;
}

bool connection::fts5_available() noexcept {
  return sqlite3_compileoption_used("ENABLE_FTS5") == 1;
}

bool connection::has_table(const std::string& name) const noexcept {
  if (db_ == nullptr) {
    return false;
  }
  // No column named: SQLITE_OK exactly when the table exists (it loads the schema when
  // the connection has not read it yet).
  return sqlite3_table_column_metadata(db_, "main", name.c_str(), nullptr, nullptr, nullptr,
                                       nullptr, nullptr, nullptr) == SQLITE_OK;
}

// --- transaction ---

expected<transaction> transaction::begin(connection& conn) {
  if (auto ok = conn.run("BEGIN IMMEDIATE"); !ok) {
    return tl::unexpected(ok.error());
  }
  return transaction(&conn);
}

transaction::~transaction() {
  if (conn_ != nullptr) {
    (void)rollback();
  }
}

expected<void> transaction::commit() {
  if (conn_ == nullptr) {
    return fail(errc::internal, "commit of a transaction that already ended");
  }
  auto ok = conn_->run("COMMIT");
  if (!ok) {
    // A failed COMMIT may leave the transaction open (e.g. SQLITE_BUSY); end it.
    (void)rollback();
    return ok;
  }
  conn_ = nullptr;
  return {};
}

expected<void> transaction::rollback() {
  if (conn_ == nullptr) {
    return {};
  }
  auto* conn = std::exchange(conn_, nullptr);
  if (!conn->in_transaction()) {
    return {};
  }
  return conn->run("ROLLBACK");
}

} // namespace troupe::storage
