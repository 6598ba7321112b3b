#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <random>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "storage/storage_fixture.hpp"
#include "support/wait_until.hpp"
#include "troupe/actors/store_writer.hpp"
#include "troupe/storage/database.hpp"
#include "troupe/storage/message_index.hpp"
#include "troupe/storage/repositories.hpp"

using namespace troupe;
using namespace troupe::actors;
using namespace troupe::storage;
using namespace troupe::storage::testing;
using namespace std::chrono_literals;

namespace {

// A migrated database with one conversation, an actor system and a store writer.
struct writer_fixture {
  explicit writer_fixture(store_writer_options options) {
    auto conn = must(open_writer(dir.db(), sync_mode::normal));
    user_record u;
    u.name = "ann";
    user = must(insert_user(conn, u));
    agent_record a;
    a.uuid = "a";
    a.name = "a";
    a.main_model = "m";
    conversation_record c;
    c.uuid = "c";
    c.owner_user_id = user;
    c.agent_id = must(insert_agent(conn, a));
    conversation = must(insert_conversation(conn, c));
    writer = spawn_store_writer(system, std::make_shared<connection>(std::move(conn)), options);
  }
  ~writer_fixture() {
    caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
  }

  write_op message(const std::string& content, row_id conv = 0) const {
    message_record m;
    m.conversation_id = conv != 0 ? conv : conversation;
    m.role = "user";
    m.content = content;
    return append_message_op(m);
  }

  store_writer_stats stats() {
    return must(writer_stats(system, writer));
  }

  temp_dir dir;
  row_id user = 0;
  row_id conversation = 0;
  caf::actor_system_config config;
  caf::actor_system system{config};
  store_writer_actor writer;
};

// Sends every op without waiting, then collects the answers in order.
std::vector<write_result> write_all(writer_fixture& f, std::vector<write_op> ops) {
  caf::scoped_actor self{f.system};
  for (auto& op : ops) {
    self->send(f.writer, write_atom::value, std::move(op));
  }
  std::vector<write_result> results;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    self->receive([&](write_result& r) { results.push_back(std::move(r)); },
                  caf::after(30s) >> [&] { FAIL("no answer from the store writer in 30 s"); });
  }
  return results;
}

} // namespace

TEST_CASE("the store writer answers a write once it is committed, with the new row id",
          "[actors][store_writer]") {
  writer_fixture f({2ms, 64});
  auto id = must(write_blocking(f.system, f.writer, f.message("hello"), 10s));
  CHECK(id > 0);
  // Visible to a separate read-only connection: it was committed before the answer.
  auto pool = must(read_pool::open(f.dir.db(), 1));
  CHECK(must(pool->with([&](connection& c) { return find_message(c, id); })).content == "hello");
}

TEST_CASE("the store writer indexes stored messages for search on its own a moment later, and "
          "at once when asked",
          "[actors][store_writer]") {
  writer_fixture f({2ms, 64});
  auto pool = must(read_pool::open(f.dir.db(), 1));
  auto matches = [&](const std::string& word) {
    return must(pool->with([&](connection& c) {
      return c.query_int("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?", word);
    }));
  };
  must(write_blocking(f.system, f.writer, f.message("a quokka smiles"), 10s));
  // The tick after the commit indexes it without anyone asking.
  REQUIRE(troupe::test::wait_until([&] { return matches("quokka") == 1; }, 10s));
  CHECK(f.stats().messages_indexed == 1);
  // Asked right after a commit, the pass runs before the answer.
  must(write_blocking(f.system, f.writer, f.message("a second quokka"), 10s));
  caf::scoped_actor self{f.system};
  std::uint64_t indexed = 0;
  self->request(f.writer, caf::infinite, index_atom::value)
      .receive([&](std::uint64_t n) { indexed = n; },
               [&](caf::error& e) { FAIL(caf::to_string(e)); });
  CHECK(matches("quokka") == 2);
  // Either this pass took it or the tick got there first; never both.
  CHECK(indexed <= 1);
  CHECK(f.stats().messages_indexed == 2);
}

TEST_CASE("the store writer commits a full batch of writes in one transaction",
          "[actors][store_writer]") {
  // The timer is far away, so only the batch size can end a batch.
  writer_fixture f({60s, 50});
  std::vector<write_op> ops;
  for (int i = 0; i < 50; ++i) {
    ops.push_back(f.message("m" + std::to_string(i)));
  }
  auto results = write_all(f, std::move(ops));
  REQUIRE(results.size() == 50);
  for (const auto& r : results) {
    CHECK(r);
  }
  auto s = f.stats();
  CHECK(s.batches == 1);
  CHECK(s.writes == 50);
  CHECK(s.largest_batch == 50);
}

TEST_CASE("the store writer splits writes into batches of at most group_commit_max",
          "[actors][store_writer]") {
  writer_fixture f({60s, 10});
  std::vector<write_op> ops;
  for (int i = 0; i < 100; ++i) {
    ops.push_back(f.message("m" + std::to_string(i)));
  }
  auto results = write_all(f, std::move(ops));
  REQUIRE(results.size() == 100);
  auto s = f.stats();
  CHECK(s.batches == 10);
  CHECK(s.largest_batch == 10);
  CHECK(s.failed_writes == 0);
}

TEST_CASE("the group-commit timer commits a partial batch", "[actors][store_writer]") {
  writer_fixture f({20ms, 1000});
  std::vector<write_op> ops;
  for (int i = 0; i < 30; ++i) {
    ops.push_back(f.message("m" + std::to_string(i)));
  }
  auto results = write_all(f, std::move(ops));
  REQUIRE(results.size() == 30);
  auto s = f.stats();
  CHECK(s.writes == 30);
  CHECK(s.batches >= 1);
  CHECK(s.batches < 30); // writes were grouped, not committed one by one
}

TEST_CASE("a failing write fails only its own caller and its batch-mates commit",
          "[actors][store_writer]") {
  writer_fixture f({60s, 3});
  auto results =
      write_all(f, {f.message("good one"), f.message("orphan", 999), f.message("good two")});
  REQUIRE(results.size() == 3);
  REQUIRE(results[0]);
  REQUIRE_FALSE(results[1]);
  CHECK(results[1].error().code == errc::conflict);
  CHECK_THAT(results[1].error().message, Catch::Contains("constraint failed"));
  REQUIRE(results[2]);
  auto s = f.stats();
  CHECK(s.batches == 1);
  CHECK(s.failed_writes == 1);
  auto pool = must(read_pool::open(f.dir.db(), 1));
  CHECK(must(pool->with([&](connection& c) { return list_messages(c, f.conversation); })).size() ==
        2);
}

TEST_CASE("the store writer commits queued writes before it exits", "[actors][store_writer]") {
  temp_dir dir;
  row_id conversation = 0;
  std::vector<write_result> results;
  {
    writer_fixture f({60s, 1000});
    conversation = f.conversation;
    caf::scoped_actor self{f.system};
    for (int i = 0; i < 5; ++i) {
      self->send(f.writer, write_atom::value, f.message("late " + std::to_string(i)));
    }
    caf::anon_send_exit(f.writer, caf::exit_reason::user_shutdown);
    for (int i = 0; i < 5; ++i) {
      self->receive([&](write_result& r) { results.push_back(std::move(r)); },
                    caf::after(30s) >> [&] { FAIL("no answer"); });
    }
    auto conn = must(connection::open(f.dir.db(), {.read_only = true}));
    CHECK(must(list_messages(conn, conversation)).size() == 5);
  }
  REQUIRE(results.size() == 5);
  for (const auto& r : results) {
    CHECK(r);
  }
}

TEST_CASE("a coroutine writes through the store writer and resumes when it is durable",
          "[actors][store_writer]") {
  writer_fixture f({1ms, 64});
  boost::asio::io_context io;
  write_result outcome = fail(errc::internal, "not run");
  boost::asio::co_spawn(io, write(f.system, f.writer, f.message("from a coroutine"), 10s),
                        [&](std::exception_ptr ep, write_result r) {
                          if (!ep) {
                            outcome = std::move(r);
                          }
                        });
  io.run();
  REQUIRE(outcome);
  auto conn = must(connection::open(f.dir.db(), {.read_only = true}));
  CHECK(must(find_message(conn, *outcome)).content == "from a coroutine");
}

TEST_CASE("every write acknowledged before a SIGKILL is present after reopening",
          "[actors][store_writer][durability]") {
  temp_dir dir;
  row_id conversation = 0;
  {
    auto conn = must(open_writer(dir.db(), sync_mode::normal));
    user_record u;
    u.name = "ann";
    agent_record a;
    a.uuid = "a";
    a.name = "a";
    a.main_model = "m";
    conversation_record c;
    c.uuid = "c";
    c.owner_user_id = must(insert_user(conn, u));
    c.agent_id = must(insert_agent(conn, a));
    conversation = must(insert_conversation(conn, c));
  }
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The child: write as fast as possible, 64 in flight; report (sequence, row id) for
    // each acknowledged write. It never returns; the parent kills it.
    ::close(fds[0]);
    try {
      auto conn = open_writer(dir.db(), sync_mode::normal);
      if (!conn) {
        ::_exit(3);
      }
      caf::actor_system_config config;
      caf::actor_system system{config};
      auto writer =
          spawn_store_writer(system, std::make_shared<connection>(std::move(*conn)), {1ms, 256});
      caf::scoped_actor self{system};
      std::int64_t next = 0;
      std::deque<std::int64_t> in_flight;
      auto send_one = [&] {
        message_record m;
        m.conversation_id = conversation;
        m.role = "user";
        m.content = "durable " + std::to_string(next);
        in_flight.push_back(next++);
        self->send(writer, write_atom::value, append_message_op(m));
      };
      for (int i = 0; i < 64; ++i) {
        send_one();
      }
      for (;;) {
        self->receive([&](write_result& r) {
          const std::int64_t seq = in_flight.front();
          in_flight.pop_front();
          if (!r) {
            ::_exit(4);
          }
          const std::int64_t record[2] = {seq, *r};
          if (::write(fds[1], record, sizeof record) != static_cast<ssize_t>(sizeof record)) {
            ::_exit(5);
          }
          send_one();
        });
      }
    } catch (...) {
      ::_exit(6);
    }
  }
  ::close(fds[1]);

  std::mt19937 rng(std::random_device{}());
  std::vector<std::pair<std::int64_t, std::int64_t>> acked;
  std::vector<char> buffer;
  auto read_available = [&](int timeout_ms) {
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) {
      return false;
    }
    char chunk[4096];
    const auto n = ::read(fds[0], chunk, sizeof chunk);
    if (n <= 0) {
      return false;
    }
    buffer.insert(buffer.end(), chunk, chunk + n);
    while (buffer.size() >= 16) {
      std::int64_t record[2];
      std::memcpy(record, buffer.data(), sizeof record);
      acked.emplace_back(record[0], record[1]);
      buffer.erase(buffer.begin(), buffer.begin() + 16);
    }
    return true;
  };
  // Let it get going, then kill it at a random moment.
  const auto start = std::chrono::steady_clock::now();
  while (acked.size() < 500 && std::chrono::steady_clock::now() - start < 30s) {
    read_available(100);
  }
  const auto kill_at = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 300)(rng));
  while (std::chrono::steady_clock::now() < kill_at) {
    read_available(5);
  }
  REQUIRE(::kill(child, SIGKILL) == 0);
  // Acknowledgements already in the pipe were given before the kill: they count too.
  while (read_available(1000)) {
  }
  ::close(fds[0]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  REQUIRE(acked.size() >= 500);

  auto conn = must(open_writer(dir.db(), sync_mode::normal));
  must(recover(conn)); // includes PRAGMA integrity_check
  must(check_integrity(conn));
  std::size_t missing = 0;
  for (const auto& [seq, id] : acked) {
    auto m = find_message(conn, id);
    if (!m || m->content != "durable " + std::to_string(seq)) {
      ++missing;
    }
  }
  INFO(acked.size() << " acknowledged writes checked");
  CHECK(missing == 0);
  // The full-text index survived the crash consistent with its table (once the pending
  // messages, stored after the last pass, are indexed).
  must(index_pending_messages(conn, 1'000'000));
  must(conn.exec("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)"));
}

TEST_CASE("a store writer without a database answers every write with an error",
          "[actors][store_writer]") {
  caf::actor_system_config config;
  caf::actor_system system{config};
  auto writer = spawn_store_writer(system, nullptr, {0ms, 8});
  auto r = write_blocking(system, writer, write_op{"nothing", nullptr, nullptr}, 10s);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::unavailable);
  caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
}
