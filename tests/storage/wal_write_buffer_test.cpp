#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>

#include "storage/storage_fixture.hpp"
#include "troupe/storage/connection.hpp"
#include "troupe/storage/wal_write_buffer.hpp"

using namespace troupe;
using namespace troupe::storage;
using namespace troupe::storage::testing;

namespace {

constexpr int value_bytes = 5000; // two overflow pages and a leaf: three frames or more

connection gathering_writer(const temp_dir& dir) {
  auto writer = must(connection::open(dir.db(), {.gather_wal_writes = true}));
  must(writer.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"));
  return writer;
}

void insert_one(connection& c, int i) {
  must(c.run("INSERT INTO t (v) VALUES (?)",
             std::string(value_bytes, static_cast<char>('a' + i % 26))));
}

// Every committed row, whole: a frame read before the shim wrote it would show as a
// wrong length, a wrong byte or a corrupt page.
void check_rows(connection& reader, int expected) {
  CHECK(must(reader.query_int("SELECT count(*) FROM t")) == expected);
  CHECK(must(reader.query_int("SELECT count(*) FROM t WHERE length(v) = ?", value_bytes)) ==
        expected);
  CHECK(must(reader.query_int(
            "SELECT count(*) FROM t WHERE substr(v, 1, 1) <> char(97 + (id - 1) % 26)")) == 0);
}

} // namespace

TEST_CASE("a writer that gathers its WAL writes makes one write per commit, and readers see "
          "every commit whole",
          "[storage][wal_buffer]") {
  REQUIRE(wal_write_buffer_vfs() != nullptr);
  temp_dir dir;
  auto writer = gathering_writer(dir);
  auto reader = must(connection::open(dir.db(), {.read_only = true}));
  const auto before = wal_write_buffer_counters();
  constexpr int commits = 100;
  for (int i = 0; i < commits; ++i) {
    insert_one(writer, i);
    check_rows(reader, i + 1);
  }
  const auto after = wal_write_buffer_counters();
  const auto gathered = after.writes_gathered - before.writes_gathered;
  const auto issued = after.writes_issued - before.writes_issued;
  // Without the shim: a header and a page per frame, three frames or more per commit.
  CHECK(gathered >= 6u * commits);
  CHECK(issued <= commits + 2u);
  CHECK(must(reader.query_int("SELECT count(*) FROM pragma_integrity_check WHERE "
                              "integrity_check <> 'ok'")) == 0);
}

TEST_CASE("a transaction larger than the page cache writes frames before its commit, and a "
          "rolled-back one leaves nothing",
          "[storage][wal_buffer]") {
  temp_dir dir;
  auto writer = gathering_writer(dir);
  must(writer.exec("PRAGMA cache_size = 8")); // pages: the transaction below spills
  auto reader = must(connection::open(dir.db(), {.read_only = true}));
  must(writer.exec("BEGIN"));
  for (int i = 0; i < 300; ++i) {
    insert_one(writer, i);
  }
  must(writer.exec("COMMIT"));
  check_rows(reader, 300);
  must(writer.exec("BEGIN"));
  for (int i = 300; i < 600; ++i) {
    insert_one(writer, i);
  }
  must(writer.exec("ROLLBACK"));
  insert_one(writer, 300);
  check_rows(reader, 301);
  CHECK(must(reader.query_int("SELECT count(*) FROM pragma_integrity_check WHERE "
                              "integrity_check <> 'ok'")) == 0);
  // A checkpoint on the writer's own connection reads the log through the shim.
  must(writer.exec("PRAGMA wal_checkpoint(TRUNCATE)"));
  check_rows(reader, 301);
}

TEST_CASE("a reader polling during gathered commits never sees a frame before it is written",
          "[storage][wal_buffer]") {
  temp_dir dir;
  auto writer = gathering_writer(dir);
  constexpr int commits = 1500;
  std::atomic<bool> done{false};
  std::atomic<int> bad_reads{0};
  std::atomic<int> reads{0};
  // No Catch2 assertion on this thread: it counts, the test's thread checks.
  std::thread polling([&] {
    auto reader = connection::open(dir.db(), {.read_only = true});
    if (!reader) {
      bad_reads.fetch_add(1);
      return;
    }
    while (!done.load()) {
      // One read transaction: every row checked comes from the same snapshot.
      const bool began = reader->exec("BEGIN").has_value();
      auto torn = reader->query_int("SELECT count(*) FROM t WHERE length(v) <> ? OR "
                                    "substr(v, 1, 1) <> char(97 + (id - 1) % 26)",
                                    value_bytes);
      const bool ended = reader->exec("COMMIT").has_value();
      if (!began || !ended || !torn || *torn != 0) {
        bad_reads.fetch_add(1);
      }
      reads.fetch_add(1);
    }
  });
  for (int i = 0; i < commits; ++i) {
    insert_one(writer, i);
  }
  done.store(true);
  polling.join();
  CHECK(reads.load() > 0);
  CHECK(bad_reads.load() == 0);
  auto reader = must(connection::open(dir.db(), {.read_only = true}));
  check_rows(reader, commits);
}

TEST_CASE("a commit that rewrote its own frames is whole in the files as soon as it returns",
          "[storage][wal_buffer]") {
  temp_dir dir;
  auto writer = gathering_writer(dir);
  must(writer.exec("CREATE TABLE counter (n INTEGER NOT NULL)"));
  must(writer.exec("INSERT INTO counter (n) VALUES (0)"));
  must(writer.exec("PRAGMA cache_size = 8"));
  must(writer.exec("BEGIN"));
  // The counter's page, cold for 50 rows, goes to the log with a spill of the page cache
  // and then changes again: SQLite overwrites its frame in place, and the commit then
  // rewrites the checksums of every frame after it, its own commit frame's header last.
  for (int i = 0; i < 300; ++i) {
    if (i % 50 == 0) {
      must(writer.exec("UPDATE counter SET n = n + 1"));
    }
    insert_one(writer, i);
  }
  must(writer.exec("COMMIT"));
  // A crash now: copy the files as they are while the writer still holds them, and let
  // SQLite recover the copy from its log (which checks every frame's checksum).
  temp_dir copy;
  std::filesystem::copy_file(dir.db(), copy.db());
  std::filesystem::copy_file(dir.db().string() + "-wal", copy.db().string() + "-wal");
  auto recovered = must(connection::open(copy.db()));
  check_rows(recovered, 300);
  CHECK(must(recovered.query_int("SELECT n FROM counter")) == 6);
}
