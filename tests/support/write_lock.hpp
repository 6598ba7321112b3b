#pragma once

// Holds a database's write lock from outside the node (another connection in BEGIN
// IMMEDIATE), so that the store writer's next commit waits on it (up to its busy timeout
// of 5 s) and writes queue up behind it.

#include <filesystem>

#include <catch2/catch.hpp>
#include <sqlite3.h>

namespace troupe::test {

class write_lock {
public:
  explicit write_lock(const std::filesystem::path& db) {
    REQUIRE(sqlite3_open(db.c_str(), &db_) == SQLITE_OK);
    // The node may be committing right now: wait for its transaction, not fail.
    sqlite3_busy_timeout(db_, 5000);
    REQUIRE(sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  }
  write_lock(const write_lock&) = delete;
  write_lock& operator=(const write_lock&) = delete;
  ~write_lock() {
    release();
    sqlite3_close(db_);
  }
  void release() {
    if (held_) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      held_ = false;
    }
  }

private:
  sqlite3* db_ = nullptr;
  bool held_ = true;
};

} // namespace troupe::test
