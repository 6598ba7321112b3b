#include <stdexcept>

#include <catch2/catch.hpp>

#include "storage/storage_fixture.hpp"
#include "troupe/storage/batch.hpp"
#include "troupe/storage/message_index.hpp"

using namespace troupe;
using namespace troupe::storage;
using namespace troupe::storage::testing;

TEST_CASE("a failing write in a batch fails alone and the others commit", "[storage][batch]") {
  fresh_db f;
  const auto conv = f.add_conversation(f.add_user("ann"), f.add_agent(), "c");
  message_record good;
  good.conversation_id = conv;
  good.role = "user";
  good.content = "first";
  message_record orphan = good;
  orphan.conversation_id = 999; // violates the foreign key
  message_record also_good = good;
  also_good.content = "third";
  std::vector<write_op> ops = {
      append_message_op(good), append_message_op(orphan), append_message_op(also_good),
      make_write("throws", [](connection&) -> expected<void> { throw std::runtime_error("boom"); }),
      write_op{"empty", nullptr, nullptr}};
  auto results = apply_batch(f.db, ops);
  REQUIRE(results.size() == 5);
  CHECK(results[0]);
  REQUIRE_FALSE(results[1]);
  CHECK(results[1].error().code == errc::conflict);
  CHECK_THAT(results[1].error().message, Catch::StartsWith("append message: "));
  CHECK(results[2]);
  REQUIRE_FALSE(results[3]);
  CHECK_THAT(results[3].error().message, Catch::Contains("boom"));
  CHECK_FALSE(results[4]);
  CHECK_FALSE(f.db.in_transaction());
  auto stored = must(list_messages(f.db, conv));
  REQUIRE(stored.size() == 2);
  CHECK(stored[0].id == *results[0]);
  CHECK(stored[1].id == *results[2]);
}

TEST_CASE("a write that half-succeeds is undone entirely by its savepoint", "[storage][batch]") {
  fresh_db f;
  const auto conv = f.add_conversation(f.add_user("ann"), f.add_agent(), "c");
  std::vector<write_op> ops = {make_write("two messages, second bad", [conv](connection& c) {
    message_record m;
    m.conversation_id = conv;
    m.role = "user";
    m.content = "half";
    must(insert_message(c, m));
    m.role = "nobody";
    return insert_message(c, m);
  })};
  auto results = apply_batch(f.db, ops);
  REQUIRE(results.size() == 1);
  CHECK_FALSE(results[0]);
  CHECK(must(list_messages(f.db, conv)).empty());
}

TEST_CASE("a batch on a read-only connection fails every write with the reason",
          "[storage][batch]") {
  fresh_db f;
  const auto conv = f.add_conversation(f.add_user("ann"), f.add_agent(), "c");
  auto ro = must(connection::open(f.dir.db(), {.read_only = true}));
  message_record m;
  m.conversation_id = conv;
  m.role = "user";
  m.content = "x";
  std::vector<write_op> ops = {append_message_op(m), append_message_op(m)};
  auto results = apply_batch(ro, ops);
  REQUIRE(results.size() == 2);
  for (const auto& r : results) {
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::permission_denied);
  }
}

TEST_CASE("a batch of many message appends stores each one and answers with its own id",
          "[storage][batch]") {
  fresh_db f;
  const auto ann = f.add_user("ann");
  const auto agent = f.add_agent();
  const auto c1 = f.add_conversation(ann, agent, "c1");
  const auto c2 = f.add_conversation(ann, agent, "c2");
  std::vector<write_op> ops;
  for (int i = 0; i < 300; ++i) {
    message_record m;
    m.conversation_id = i % 3 == 0 ? c2 : c1;
    m.role = "user";
    m.content = "note number" + std::to_string(i) + " xylophone";
    m.prompt_tokens = i;
    ops.push_back(append_message_op(m));
    if (i == 150) {
      ops.push_back(make_write("a step between", [](connection&) -> expected<void> { return {}; }));
    }
  }
  auto results = apply_batch(f.db, ops);
  REQUIRE(results.size() == 301);
  int i = 0;
  for (std::size_t k = 0; k < results.size(); ++k) {
    REQUIRE(results[k]);
    if (!ops[k].message) {
      continue;
    }
    auto m = must(find_message(f.db, *results[k]));
    CHECK(m.content == "note number" + std::to_string(i) + " xylophone");
    CHECK(m.prompt_tokens == i);
    ++i;
  }
  CHECK(i == 300);
  CHECK(must(list_messages(f.db, c2)).size() == 100);
  // Every one is in the full-text index after one indexing pass.
  CHECK(must(index_pending_messages(f.db, 1000)) == 300);
  CHECK(must(f.db.query_int("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?",
                            std::string("xylophone"))) == 300);
  must(f.db.exec("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)"));
}
