#include <algorithm>
#include <set>

#include <catch2/catch.hpp>

#include "storage/storage_fixture.hpp"
#include "troupe/storage/message_index.hpp"
#include "troupe/storage/search.hpp"

using namespace troupe;
using namespace troupe::storage;
using namespace troupe::storage::testing;

namespace {

std::set<row_id> ids(const std::vector<search_hit>& hits) {
  std::set<row_id> out;
  for (const auto& h : hits) {
    out.insert(h.message_id);
  }
  return out;
}

// Searches after an indexing pass, as session search does (message_index.hpp).
std::vector<search_hit> find(connection& c, row_id owner, const std::string& text,
                             search_engine_kind engine, std::int64_t limit = 20) {
  must(index_pending_messages(c, 1'000'000));
  return must(search_messages(c, {owner, text, limit, engine}));
}

// Two users with one conversation each; both talk about penguins.
struct two_users : fresh_db {
  row_id ann = add_user("ann");
  row_id bob = add_user("bob");
  row_id agent = add_agent();
  row_id ann_conv = add_conversation(ann, agent, "ann-conv");
  row_id bob_conv = add_conversation(bob, agent, "bob-conv");
  row_id ann_msg = add_message(ann_conv, "user", "Tell me about emperor penguins in Antarctica");
  row_id bob_msg = add_message(bob_conv, "user", "My secret penguin password is hunter2");
  // As the store writer does a moment after they are stored (message_index.hpp).
  std::int64_t indexed = must(index_pending_messages(db, 100));
};

const auto both_engines = {search_engine_kind::fts, search_engine_kind::like};

} // namespace

TEST_CASE("search never returns another user's messages", "[storage][search]") {
  two_users f;
  for (auto engine : both_engines) {
    INFO("engine " << static_cast<int>(engine));
    auto ann_hits = find(f.db, f.ann, "penguins penguin hunter2 secret", engine);
    CHECK(ids(ann_hits) == std::set<row_id>{f.ann_msg});
    auto bob_hits = find(f.db, f.bob, "emperor Antarctica penguins penguin", engine);
    CHECK(ids(bob_hits) == std::set<row_id>{f.bob_msg});
    CHECK(find(f.db, 999, "penguins", engine).empty());
  }
}

TEST_CASE("an edited message is found by its new words and not by its old ones",
          "[storage][search]") {
  two_users f;
  must(update_message_content(f.db, f.ann_msg, "Actually I want to learn about walruses"));
  for (auto engine : both_engines) {
    INFO("engine " << static_cast<int>(engine));
    CHECK(find(f.db, f.ann, "emperor", engine).empty());
    CHECK(find(f.db, f.ann, "Antarctica", engine).empty());
    auto hits = find(f.db, f.ann, "walruses", engine);
    REQUIRE(hits.size() == 1);
    CHECK(hits[0].message_id == f.ann_msg);
    CHECK_THAT(hits[0].snippet, Catch::Contains("[walruses]"));
  }
  // The FTS index agrees with its content table after the update.
  must(f.db.exec("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)"));
}

TEST_CASE("a deleted message is no longer found", "[storage][search]") {
  two_users f;
  must(delete_message(f.db, f.ann_msg));
  for (auto engine : both_engines) {
    CHECK(find(f.db, f.ann, "penguins emperor", engine).empty());
  }
  must(f.db.exec("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)"));
}

TEST_CASE("the LIKE fallback keeps the same results contract as FTS", "[storage][search]") {
  fresh_db f;
  const auto ann = f.add_user("ann");
  const auto bob = f.add_user("bob");
  const auto agent = f.add_agent();
  const auto c1 = f.add_conversation(ann, agent, "c1");
  const auto c2 = f.add_conversation(ann, agent, "c2");
  const auto other = f.add_conversation(bob, agent, "c3");
  std::set<row_id> expected_ids;
  expected_ids.insert(f.add_message(c1, "user", "deploy the kraken service to staging"));
  expected_ids.insert(f.add_message(c1, "assistant", "The kraken deploy finished"));
  f.add_message(c1, "user", "unrelated chatter about lunch");
  expected_ids.insert(f.add_message(c2, "user", "rollback staging please"));
  f.add_message(other, "user", "kraken staging belongs to bob");
  const std::string query = "kraken staging";

  auto fts = find(f.db, ann, query, search_engine_kind::fts);
  auto like = find(f.db, ann, query, search_engine_kind::like);
  CHECK(ids(fts) == expected_ids);
  CHECK(ids(like) == expected_ids);
  for (const auto* hits : {&fts, &like}) {
    for (const auto& h : *hits) {
      CHECK((h.conversation_uuid == "c1" || h.conversation_uuid == "c2"));
      CHECK_FALSE(h.role.empty());
      CHECK(h.created_at > 0);
      CHECK(h.snippet.find('[') != std::string::npos);
      CHECK(h.snippet.size() <= 300);
    }
    // The message with both words ranks first in either engine.
    REQUIRE_FALSE(hits->empty());
    CHECK(hits->front().snippet.find("[kraken]") != std::string::npos);
    CHECK(hits->front().snippet.find("[staging]") != std::string::npos);
  }
  CHECK(find(f.db, ann, query, search_engine_kind::fts, 1).size() == 1);
  CHECK(find(f.db, ann, query, search_engine_kind::like, 1).size() == 1);
}

TEST_CASE("automatic search falls back to LIKE when the index is missing", "[storage][search]") {
  two_users f;
  must(f.db.exec("DROP TABLE messages_fts; DROP TRIGGER IF EXISTS messages_fts_insert; "
                 "DROP TRIGGER messages_fts_delete; DROP TRIGGER messages_fts_update;"));
  auto hits = find(f.db, f.ann, "penguins", search_engine_kind::automatic);
  CHECK(ids(hits) == std::set<row_id>{f.ann_msg});
  auto fts = search_messages(f.db, {f.ann, "penguins", 10, search_engine_kind::fts});
  REQUIRE_FALSE(fts);
  CHECK(fts.error().code == errc::unavailable);
}

TEST_CASE("hostile query text is never interpreted as FTS syntax", "[storage][search]") {
  fresh_db f;
  const auto ann = f.add_user("ann");
  const auto bob = f.add_user("bob");
  const auto agent = f.add_agent();
  const auto conv = f.add_conversation(ann, agent, "c");
  const auto near_msg = f.add_message(conv, "user", "meet me NEAR the harbour");
  const auto plain = f.add_message(conv, "user", "alpha beta gamma");
  f.add_message(f.add_conversation(bob, agent, "b"), "user", "content alpha from bob");

  CHECK(fts_match_expression(R"(a "b" NEAR(c d) e* col:f (g OR h) ^i -j + k)") ==
        R"("a" OR "b" OR "NEAR" OR "c" OR "d" OR "e" OR "col" OR "f" OR "g" OR "OR" OR "h" OR )"
        R"("i" OR "j" OR "k")");

  const std::vector<std::string> hostile = {
      R"(")",
      R"("unterminated)",
      R"(NEAR(alpha gamma, 1))",
      "alpha*",
      "content:alpha",
      "content : alpha",
      "(alpha",
      "alpha) OR (beta",
      "alpha AND NOT gamma",
      "{content}: alpha",
      "^alpha",
      "alpha - beta",
      "rowid:1 OR 1=1 --",
      "'; DROP TABLE messages; --",
      R"(owner_user_id : "2")",
      R"(alpha) OR owner_user_id : ("2)",
      R"(content : alpha OR {owner_user_id content} : 2)",
      std::string("alpha\0beta", 10),
      "\xff\xfe alpha \xc3",
  };
  must(index_pending_messages(f.db, 1'000'000));
  for (const auto& text : hostile) {
    for (auto engine : both_engines) {
      INFO("query: " << text << " engine " << static_cast<int>(engine));
      auto hits = search_messages(f.db, {ann, text, 20, engine});
      REQUIRE(hits);
      for (const auto& h : *hits) {
        CHECK(h.conversation_uuid == "c"); // never bob's message
      }
    }
  }
  // A column filter in user text is just two words: "content" and "alpha". Bob's message
  // contains both but is not Ann's; Ann's "alpha" message is found.
  CHECK(ids(find(f.db, ann, "content:alpha", search_engine_kind::fts)) == std::set<row_id>{plain});
  // NEAR is a word to look for, not an operator.
  CHECK(ids(find(f.db, ann, "NEAR(", search_engine_kind::fts)) == std::set<row_id>{near_msg});
  // A prefix star does not widen the search.
  CHECK(find(f.db, ann, "alph*", search_engine_kind::fts).empty());
  // Text with no words finds nothing, without error.
  CHECK(find(f.db, ann, R"(" * ( ) : ^ -)", search_engine_kind::fts).empty());
  CHECK(must(f.db.query_int("SELECT count(*) FROM messages")) == 3);
}

TEST_CASE("search ranks by relevance (bm25) and snippets mark the match", "[storage][search]") {
  fresh_db f;
  const auto ann = f.add_user("ann");
  const auto conv = f.add_conversation(ann, f.add_agent(), "c");
  const auto weak = f.add_message(conv, "user",
                                  "a long message that mentions zebra once among many other "
                                  "words about weather, lunch, trains, meetings and more");
  const auto strong = f.add_message(conv, "user", "zebra zebra zebra");
  auto hits = find(f.db, ann, "zebra", search_engine_kind::fts);
  REQUIRE(hits.size() == 2);
  CHECK(hits[0].message_id == strong);
  CHECK(hits[1].message_id == weak);
  CHECK_THAT(hits[1].snippet, Catch::Contains("[zebra]"));
}

TEST_CASE("query terms are split on punctuation, deduplicated and bounded", "[storage][search]") {
  CHECK(query_terms("Hello, hello! world_wide") ==
        std::vector<std::string>{"Hello", "hello", "world", "wide"});
  CHECK(query_terms("").empty());
  CHECK(query_terms("\xe4\xbd\xa0\xe5\xa5\xbd world") ==
        std::vector<std::string>{"\xe4\xbd\xa0\xe5\xa5\xbd", "world"});
  std::string many;
  for (int i = 0; i < 40; ++i) {
    many += "w" + std::to_string(i) + " ";
  }
  CHECK(query_terms(many).size() == 16);
  CHECK(query_terms(std::string(500, 'x')).at(0).size() == 64);
}

TEST_CASE("very common words do not select or rank hits, and alone give newest first",
          "[storage][search]") {
  fresh_db f;
  const auto ann = f.add_user("ann");
  const auto conv = f.add_conversation(ann, f.add_agent(), "c");
  std::vector<row_id> common;
  for (int i = 0; i < 5; ++i) {
    common.push_back(f.add_message(conv, "user", "the weather is fine " + std::to_string(i)));
  }
  const auto zebra = f.add_message(conv, "user", "the zebra");
  must(index_pending_messages(f.db, 1'000'000));
  search_query q{ann, "the zebra", 20, search_engine_kind::fts};
  q.common_term_rows = 3; // "the" is in 6 messages: a stop word here
  auto hits = must(search_messages(f.db, q));
  REQUIRE(hits.size() == 1);
  CHECK(hits[0].message_id == zebra);

  q.text = "the";
  hits = must(search_messages(f.db, q));
  REQUIRE(hits.size() == 6);
  CHECK(hits[0].message_id == zebra); // newest first
  CHECK(hits[5].message_id == common[0]);

  q.common_term_rows = 0; // no stop words: "the" selects all six, "zebra" ranks first
  q.text = "the zebra";
  hits = must(search_messages(f.db, q));
  REQUIRE(hits.size() == 6);
  CHECK(hits[0].message_id == zebra);
}

TEST_CASE("messages stored one or many at a time are found by the index after an indexing pass",
          "[storage][search]") {
  two_users f;
  must(index_pending_messages(f.db, 100));
  CHECK(must(f.db.query_int("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND "
                            "name = 'messages_fts_insert'")) == 0);
  std::vector<message_record> batch;
  for (const auto* text : {"a narwhal pod", "narwhals hunt cod", "nothing about whales"}) {
    message_record m;
    m.conversation_id = f.ann_conv;
    m.role = "assistant";
    m.content = text;
    batch.push_back(m);
  }
  const auto many = must(insert_messages(f.db, batch));
  REQUIRE(many.size() == 3);
  const auto single = f.add_message(f.bob_conv, "user", "bob saw a narwhal");

  // Pending: the index does not hold them yet; the LIKE engine reads the table.
  CHECK(must(search_messages(f.db, {f.ann, "narwhal", 20, search_engine_kind::fts})).empty());
  CHECK(must(search_messages(f.db, {f.ann, "narwhal", 20, search_engine_kind::like})).size() == 2);
  CHECK(must(index_pending_messages(f.db, 100)) == 4);
  CHECK(must(messages_indexed_to(f.db)) == single);
  CHECK(ids(find(f.db, f.ann, "narwhal narwhals", search_engine_kind::fts)) ==
        std::set<row_id>{many[0], many[1]});
  CHECK(ids(find(f.db, f.bob, "narwhal", search_engine_kind::fts)) == std::set<row_id>{single});
  CHECK(ids(find(f.db, f.ann, "whales", search_engine_kind::fts)) == std::set<row_id>{many[2]});
  must(f.db.exec("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)"));
}

TEST_CASE("a message edited or deleted before it was indexed leaves the index sound",
          "[storage][search]") {
  two_users f;
  must(index_pending_messages(f.db, 100));
  const auto edited = f.add_message(f.ann_conv, "user", "first words about otters");
  const auto deleted = f.add_message(f.ann_conv, "user", "otters that vanish");
  must(update_message_content(f.db, edited, "second words about beavers"));
  must(delete_message(f.db, deleted));
  CHECK(must(index_pending_messages(f.db, 100)) == 1);
  CHECK(find(f.db, f.ann, "otters", search_engine_kind::fts).empty());
  CHECK(ids(find(f.db, f.ann, "beavers", search_engine_kind::fts)) == std::set<row_id>{edited});
  // A later message never takes an id the index already passed.
  const auto next = f.add_message(f.ann_conv, "user", "beavers again");
  CHECK(next > edited);
  CHECK(must(index_pending_messages(f.db, 100)) == 1);
  must(f.db.exec("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)"));
}
