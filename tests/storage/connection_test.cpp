#include <catch2/catch.hpp>

#include "storage/storage_fixture.hpp"
#include "troupe/storage/connection.hpp"

using namespace troupe;
using namespace troupe::storage;
using namespace troupe::storage::testing;

TEST_CASE("a connection reuses a cached prepared statement for the same SQL", "[storage]") {
  temp_dir dir;
  auto c = must(connection::open(dir.db()));
  must(c.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"));
  for (int i = 0; i < 5; ++i) {
    must(c.run("INSERT INTO t (v) VALUES (?)", std::string("x")));
  }
  CHECK(c.cached_statements() == 1);
  CHECK(must(c.query_int("SELECT count(*) FROM t")) == 5);
  CHECK(c.cached_statements() == 2);
}

TEST_CASE("a statement in use is not handed out twice", "[storage]") {
  temp_dir dir;
  auto c = must(connection::open(dir.db()));
  must(c.exec("CREATE TABLE t (v INTEGER); INSERT INTO t VALUES (1), (2);"));
  auto outer = must(c.prepare("SELECT v FROM t ORDER BY v"));
  REQUIRE(must(outer.step()));
  auto inner = must(c.prepare("SELECT v FROM t ORDER BY v"));
  REQUIRE(must(inner.step()));
  CHECK(inner.int64(0) == 1);
  REQUIRE(must(outer.step()));
  CHECK(outer.int64(0) == 2); // the outer cursor was not reset by the inner use
}

TEST_CASE("typed binds and reads round-trip text, integers, reals and null", "[storage]") {
  temp_dir dir;
  auto c = must(connection::open(dir.db()));
  must(c.exec("CREATE TABLE t (s TEXT, i INTEGER, r REAL, n INTEGER)"));
  const std::string text("zero\0byte \xE4\xB8\xAD", 14);
  must(c.run("INSERT INTO t VALUES (?, ?, ?, ?)", text, std::int64_t{1} << 40, 2.5,
             std::optional<std::int64_t>{}));
  auto st = must(c.prepare("SELECT s, i, r, n FROM t"));
  REQUIRE(must(st.step()));
  CHECK(st.text(0) == text);
  CHECK(st.int64(1) == (std::int64_t{1} << 40));
  CHECK(st.real(2) == 2.5);
  CHECK(st.is_null(3));
  CHECK_FALSE(st.optional_int64(3).has_value());
}

TEST_CASE("an SQL error carries the statement and SQLite's message", "[storage]") {
  temp_dir dir;
  auto c = must(connection::open(dir.db()));
  auto bad = c.prepare("SELEKT 1");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == errc::invalid_argument);
  CHECK_THAT(bad.error().message, Catch::Contains("SELEKT 1"));
  CHECK_THAT(bad.error().message, Catch::Contains("syntax error"));

  must(c.exec("CREATE TABLE u (k TEXT UNIQUE)"));
  must(c.run("INSERT INTO u VALUES ('a')"));
  auto dup = c.run("INSERT INTO u VALUES ('a')");
  REQUIRE_FALSE(dup);
  CHECK(dup.error().code == errc::conflict);
  CHECK_THAT(dup.error().message, Catch::Contains("UNIQUE constraint failed"));
}

TEST_CASE("a transaction not committed is rolled back", "[storage]") {
  temp_dir dir;
  auto c = must(connection::open(dir.db()));
  must(c.exec("CREATE TABLE t (v INTEGER)"));
  {
    auto tx = must(transaction::begin(c));
    must(c.run("INSERT INTO t VALUES (1)"));
  }
  CHECK(must(c.query_int("SELECT count(*) FROM t")) == 0);
  auto failed = in_transaction(c, [](connection& conn) -> expected<void> {
    must(conn.run("INSERT INTO t VALUES (2)"));
    return fail(errc::invalid_argument, "changed my mind");
  });
  CHECK_FALSE(failed);
  CHECK(must(c.query_int("SELECT count(*) FROM t")) == 0);
  must(in_transaction(c, [](connection& conn) { return conn.run("INSERT INTO t VALUES (3)"); }));
  CHECK(must(c.query_int("SELECT count(*) FROM t")) == 1);
  CHECK_FALSE(c.in_transaction());
}

TEST_CASE("a read-only connection refuses to write", "[storage]") {
  temp_dir dir;
  {
    auto w = must(connection::open(dir.db()));
    must(w.exec("CREATE TABLE t (v INTEGER)"));
  }
  auto r = must(connection::open(dir.db(), {.read_only = true}));
  auto write = r.run("INSERT INTO t VALUES (1)");
  REQUIRE_FALSE(write);
  CHECK(write.error().code == errc::permission_denied);
}

TEST_CASE("opening a file that is not a database fails with a clear error", "[storage]") {
  temp_dir dir;
  {
    std::FILE* f = std::fopen(dir.db().c_str(), "wb");
    REQUIRE(f != nullptr);
    std::fputs("this is not an SQLite database, just some text that is long enough", f);
    std::fclose(f);
  }
  auto c = connection::open(dir.db());
  REQUIRE_FALSE(c);
  CHECK(c.error().code == errc::io_error);
  CHECK_THAT(c.error().message, Catch::Contains("not a database"));
}

TEST_CASE("synchronous mode parses normal and full and rejects others", "[storage]") {
  CHECK(must(parse_sync_mode("normal")) == sync_mode::normal);
  CHECK(must(parse_sync_mode("full")) == sync_mode::full);
  auto bad = parse_sync_mode("off");
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message, Catch::Contains("normal or full"));
}

TEST_CASE("the writer connection runs in WAL mode with the configured synchronous level",
          "[storage]") {
  temp_dir dir;
  auto normal = must(open_writer(dir.db(), sync_mode::normal));
  auto st = must(normal.prepare("PRAGMA journal_mode"));
  REQUIRE(must(st.step()));
  CHECK(st.text(0) == "wal");
  CHECK(must(normal.query_int("PRAGMA synchronous")) == 1);
  CHECK(must(normal.query_int("PRAGMA foreign_keys")) == 1);
  auto full = must(open_writer(dir.db(), sync_mode::full));
  CHECK(must(full.query_int("PRAGMA synchronous")) == 2);
}

TEST_CASE("has_table finds tables and virtual tables in the parsed schema without a statement, "
          "also one another connection created",
          "[storage][memory]") {
  temp_dir dir;
  auto c = must(connection::open(dir.db()));
  must(c.exec("CREATE TABLE t (v INTEGER)"));
  const auto statements = c.cached_statements();
  CHECK(c.has_table("t"));
  CHECK_FALSE(c.has_table("missing"));
  CHECK_FALSE(c.has_table("t'; DROP TABLE t; --"));
  CHECK(c.cached_statements() == statements);
  if (connection::fts5_available()) {
    must(c.exec("CREATE VIRTUAL TABLE f USING fts5(body)"));
    CHECK(c.has_table("f"));
  }
  // Another connection adds a table: seen once this one has run a statement since.
  auto other = must(connection::open(dir.db()));
  must(other.exec("CREATE TABLE later (v INTEGER)"));
  CHECK(must(c.query_int("SELECT count(*) FROM t")) == 0);
  CHECK(c.has_table("later"));
  CHECK(c.has_table("t"));
}
