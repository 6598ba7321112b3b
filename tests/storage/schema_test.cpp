#include <set>

#include <catch2/catch.hpp>

#include "storage/storage_fixture.hpp"
#include "troupe/storage/message_index.hpp"
#include "troupe/storage/schema.hpp"
#include "troupe/storage/search.hpp"

using namespace troupe;
using namespace troupe::storage;
using namespace troupe::storage::testing;

namespace {

std::int64_t table_count(connection& c, const std::string& name) {
  return must(c.query_int("SELECT count(*) FROM sqlite_master WHERE name = ?", name));
}

} // namespace

TEST_CASE("migrations bring a new database to the latest version with every table",
          "[storage][schema]") {
  temp_dir dir;
  auto c = must(connection::open(dir.db()));
  CHECK(must(schema_version(c)) == 0);
  CHECK(must(migrate(c)) == latest_schema_version());
  CHECK(must(schema_version(c)) == latest_schema_version());
  for (const char* table : {"users",
                            "api_tokens",
                            "providers",
                            "agents",
                            "conversations",
                            "messages",
                            "runs",
                            "execution_steps",
                            "plans",
                            "plan_items",
                            "files",
                            "memory_items",
                            "memory_revisions",
                            "memory_evidence",
                            "channels",
                            "channel_threads",
                            "inbound_journal",
                            "outbox",
                            "tools",
                            "mcp_servers",
                            "search_engines",
                            "messages_fts"}) {
    INFO(table);
    CHECK(table_count(c, table) == 1);
  }
  // A second run changes nothing.
  CHECK(must(migrate(c)) == latest_schema_version());
}

TEST_CASE("a database newer than the binary is refused with a clear message", "[storage][schema]") {
  temp_dir dir;
  {
    auto c = must(open_writer(dir.db(), sync_mode::normal));
    must(c.exec("PRAGMA user_version = 999"));
  }
  auto refused = open_writer(dir.db(), sync_mode::normal);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == errc::conflict);
  CHECK_THAT(refused.error().message, Catch::Contains("schema version 999"));
  CHECK_THAT(refused.error().message, Catch::Contains("newer than this troupe binary"));
  // Nothing was changed by the refusal.
  auto c = must(connection::open(dir.db()));
  CHECK(must(schema_version(c)) == 999);
}

TEST_CASE("foreign keys are enforced", "[storage][schema]") {
  fresh_db f;
  conversation_record c;
  c.uuid = "c";
  c.owner_user_id = 12345; // no such user
  c.agent_id = f.add_agent();
  auto r = insert_conversation(f.db, c);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::conflict);
  CHECK_THAT(r.error().message, Catch::Contains("FOREIGN KEY"));
  message_record m;
  m.conversation_id = 12345; // no such conversation
  m.role = "user";
  m.content = "orphan";
  auto orphan = insert_message(f.db, m);
  REQUIRE_FALSE(orphan);
  CHECK(orphan.error().code == errc::conflict);
}

TEST_CASE("check constraints reject an unknown message role and run status", "[storage][schema]") {
  fresh_db f;
  const auto user = f.add_user("ann");
  const auto conv = f.add_conversation(user, f.add_agent(), "c1");
  message_record m;
  m.conversation_id = conv;
  m.role = "wizard";
  CHECK_FALSE(insert_message(f.db, m));
  auto bad = f.db.run("UPDATE runs SET status = 'paused'");
  CHECK(bad); // no rows: nothing to violate
  run_record r;
  r.uuid = "r1";
  r.conversation_id = conv;
  r.agent_id = 1;
  const auto run = must(insert_run(f.db, r));
  auto paused = f.db.run("UPDATE runs SET status = 'paused' WHERE id = ?", run);
  REQUIRE_FALSE(paused);
  CHECK_THAT(paused.error().message, Catch::Contains("CHECK constraint failed"));
}

TEST_CASE("the full-text index is backfilled from existing messages when it is created",
          "[storage][schema][search]") {
  fresh_db f;
  const auto user = f.add_user("ann");
  const auto conv = f.add_conversation(user, f.add_agent(), "c1");
  // Simulate a database made without the index (e.g. by a build without FTS5).
  must(f.db.exec("DROP TABLE messages_fts; DROP TRIGGER IF EXISTS messages_fts_insert; "
                 "DROP TRIGGER IF EXISTS messages_fts_delete; "
                 "DROP TRIGGER IF EXISTS messages_fts_update;"));
  const auto id = f.add_message(conv, "user", "the quokka smiles at dawn");
  CHECK_FALSE(must(has_message_index(f.db)));
  CHECK(must(ensure_message_index(f.db)));
  auto hits = must(search_messages(f.db, {user, "quokka", 10, search_engine_kind::fts}));
  REQUIRE(hits.size() == 1);
  CHECK(hits[0].message_id == id);
}

TEST_CASE("the run events migration applies on an existing database and keeps its rows",
          "[storage][schema]") {
  temp_dir dir;
  row_id run = 0;
  {
    // A database as version 3 left it: no run_events table, a run already stored.
    auto c = must(open_writer(dir.db(), sync_mode::normal));
    must(c.exec("DROP TABLE run_events; PRAGMA user_version = 3"));
    user_record u;
    u.name = "ann";
    const auto user = must(insert_user(c, u));
    agent_record a;
    a.uuid = "agent-1";
    a.name = "helper";
    a.main_model = "m";
    const auto agent = must(insert_agent(c, a));
    conversation_record conv;
    conv.uuid = "c1";
    conv.owner_user_id = user;
    conv.agent_id = agent;
    run_record r;
    r.uuid = "run-before";
    r.conversation_id = must(insert_conversation(c, conv));
    r.agent_id = agent;
    run = must(insert_run(c, r));
    CHECK(table_count(c, "run_events") == 0);
  }
  // Opening it again migrates it.
  auto c = must(open_writer(dir.db(), sync_mode::normal));
  CHECK(must(schema_version(c)) == latest_schema_version());
  CHECK(table_count(c, "run_events") == 1);
  CHECK(must(find_run_by_uuid(c, "run-before")).id == run);
  const std::vector<run_event_view> events = {{1, "run", R"({"type":"run.started"})"},
                                              {2, "", "[DONE]"}};
  CHECK(must(append_run_events(c, "run-before", events)) == 2);
  CHECK(must(list_run_events(c, run)).size() == 2);
}

TEST_CASE("migrating a database whose messages were indexed by a trigger keeps its index and "
          "indexes new messages in passes",
          "[storage][schema][search]") {
  fresh_db f;
  const auto user = f.add_user("ann");
  const auto conv = f.add_conversation(user, f.add_agent(), "c1");
  // As versions 2-10 left it: no progress row, an INSERT trigger indexing each message.
  must(f.db.exec("DROP TABLE fts_progress; DROP TRIGGER messages_fts_delete; "
                 "DROP TRIGGER messages_fts_update; "
                 "CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN "
                 "INSERT INTO messages_fts(rowid, content, owner_user_id) "
                 "VALUES (new.id, new.content, new.owner_user_id); END;"));
  const auto before = f.add_message(conv, "user", "an axolotl regrows its legs");
  must(f.db.exec("PRAGMA user_version = 10;"));
  CHECK(must(migrate(f.db)) == latest_schema_version());
  CHECK(table_count(f.db, "messages_fts_insert") == 0);
  // The message the trigger indexed counts as indexed; the next one waits for a pass.
  CHECK(must(messages_indexed_to(f.db)) == before);
  const auto after = f.add_message(conv, "user", "a second axolotl");
  CHECK(after > before);
  auto found = [&] {
    std::set<row_id> ids;
    for (const auto& h :
         must(search_messages(f.db, {user, "axolotl", 10, search_engine_kind::fts}))) {
      ids.insert(h.message_id);
    }
    return ids;
  };
  CHECK(found() == std::set<row_id>{before}); // the newer one waits for a pass
  CHECK(must(index_pending_messages(f.db, 100)) == 1);
  CHECK(must(messages_indexed_to(f.db)) == after);
  CHECK(found() == std::set<row_id>{before, after}); // both by the index, each once
  must(f.db.exec("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)"));
}
