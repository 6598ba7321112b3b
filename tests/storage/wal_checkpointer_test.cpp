#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>

#include "storage/storage_fixture.hpp"
#include "troupe/storage/connection.hpp"
#include "troupe/storage/wal_checkpointer.hpp"

using namespace troupe;
using namespace troupe::storage;
using namespace troupe::storage::testing;

namespace {

// One commit per row; a 5,000-byte value makes each commit append at least two frames.
void insert_rows(connection& c, int n) {
  const std::string value(5000, 'v');
  for (int i = 0; i < n; ++i) {
    must(c.run("INSERT INTO t (v) VALUES (?)", value));
  }
}

} // namespace

TEST_CASE("a writer with a checkpointer never checkpoints inside its own commits",
          "[storage][checkpoint]") {
  temp_dir dir;
  auto writer = must(connection::open(dir.db()));
  must(writer.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"));
  auto checkpointer =
      must(wal_checkpointer::start(dir.db(), writer, {.checkpoint_frames = 1'000'000}));
  // SQLite's automatic checkpoint would have restarted the WAL after 1,000 frames.
  insert_rows(writer, 700);
  const auto stats = checkpointer->stats();
  CHECK(stats.largest_wal_frames >= 1400);
  CHECK(stats.checkpoints == 0);
}

TEST_CASE("the checkpointer copies the WAL back once it passes its threshold, and the log "
          "restarts",
          "[storage][checkpoint]") {
  temp_dir dir;
  auto writer = must(connection::open(dir.db()));
  must(writer.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"));
  auto checkpointer = must(wal_checkpointer::start(dir.db(), writer, {.checkpoint_frames = 64}));
  insert_rows(writer, 100);
  // Poll with a deadline: the checkpoint runs on the checkpointer's thread.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (checkpointer->stats().checkpoints == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  REQUIRE(checkpointer->stats().checkpoints >= 1);
  CHECK(checkpointer->stats().frames_copied >= 64);
  CHECK(checkpointer->stats().failures == 0);
  // Once a checkpoint has copied all of it (nothing else reads the WAL, and nothing is
  // written meanwhile), the next commit writes the log from its start again. A checkpoint
  // the threshold started during the inserts may end first, complete for the WAL it saw
  // then; so two rounds: the checkpoint that ends the second one began after the inserts.
  std::uint64_t complete = 0;
  for (int round = 0; round < 2; ++round) {
    const auto ran = checkpointer->stats().checkpoints;
    complete = checkpointer->stats().complete;
    checkpointer->request();
    while (checkpointer->stats().checkpoints == ran &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    REQUIRE(checkpointer->stats().checkpoints > ran);
  }
  REQUIRE(checkpointer->stats().complete > complete);
  insert_rows(writer, 1);
  CHECK(checkpointer->stats().last_wal_frames <= 4);
  auto reader = must(connection::open(dir.db(), {.read_only = true}));
  CHECK(must(reader.query_int("SELECT count(*) FROM t")) == 101);
}

TEST_CASE("a writer that outlives its checkpointer keeps committing", "[storage][checkpoint]") {
  temp_dir dir;
  auto writer = must(connection::open(dir.db()));
  must(writer.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"));
  {
    auto checkpointer = must(wal_checkpointer::start(dir.db(), writer, {.checkpoint_frames = 8}));
    insert_rows(writer, 10);
  }
  insert_rows(writer, 10);
  CHECK(must(writer.query_int("SELECT count(*) FROM t")) == 20);
}

TEST_CASE("a writer that never pauses still has its log restarted at restart_frames",
          "[storage][checkpoint]") {
  temp_dir dir;
  auto writer = must(connection::open(dir.db()));
  must(writer.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"));
  auto checkpointer = must(
      wal_checkpointer::start(dir.db(), writer, {.checkpoint_frames = 64, .restart_frames = 256}));
  // Commits back to back: the thread's checkpoints (two fsyncs each) never find the
  // writer between transactions with the whole log copied back, so only the writer's own
  // checkpoint at 256 frames lets the log start again. Without it the log would hold all
  // of the 3,000-odd frames written here.
  insert_rows(writer, 1500);
  const auto stats = checkpointer->stats();
  CHECK(stats.restarts >= 1);
  CHECK(stats.writer_checkpoints >= 1);
  // A commit appends at most a few frames; the thread's checkpoint under way when the log
  // reaches 256 ends within a few hundred more.
  CHECK(stats.largest_wal_frames < 1500);
  CHECK(stats.failures == 0);
  auto reader = must(connection::open(dir.db(), {.read_only = true}));
  CHECK(must(reader.query_int("SELECT count(*) FROM t")) == 1500);
}
