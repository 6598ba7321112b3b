#include <catch2/catch.hpp>

#include "storage/storage_fixture.hpp"

using namespace troupe;
using namespace troupe::storage;
using namespace troupe::storage::testing;

TEST_CASE("recovery marks runs left running as interrupted, with a step saying why",
          "[storage][recovery]") {
  temp_dir dir;
  row_id running_id = 0;
  row_id done_id = 0;
  {
    auto db = must(open_writer(dir.db(), sync_mode::normal));
    user_record u;
    u.name = "ann";
    const auto user = must(insert_user(db, u));
    agent_record a;
    a.uuid = "a";
    a.name = "a";
    a.main_model = "m";
    const auto agent = must(insert_agent(db, a));
    conversation_record c;
    c.uuid = "c";
    c.owner_user_id = user;
    c.agent_id = agent;
    run_record r;
    r.conversation_id = must(insert_conversation(db, c));
    r.agent_id = agent;
    r.uuid = "r1";
    running_id = must(insert_run(db, r));
    must(set_run_status(db, running_id, run_status::running));
    r.uuid = "r2";
    done_id = must(insert_run(db, r));
    must(set_run_status(db, done_id, run_status::succeeded));
  } // the process "dies" here with r1 running

  auto db = must(open_writer(dir.db(), sync_mode::normal));
  auto report = must(recover(db));
  CHECK(report.interrupted_runs == 1);
  auto run = must(find_run(db, running_id));
  CHECK(run.status == run_status::interrupted);
  CHECK(run.finished_at.has_value());
  CHECK_THAT(run.error, Catch::Contains("interrupted"));
  auto steps = must(list_steps(db, running_id));
  REQUIRE(steps.size() == 1);
  CHECK(steps[0].kind == "recovery");
  CHECK_THAT(steps[0].output_json, Catch::Contains("stopped while this run was running"));
  CHECK(must(find_run(db, done_id)).status == run_status::succeeded);
  CHECK(must(list_steps(db, done_id)).empty());
  // Recovering again finds nothing more to do.
  CHECK(must(recover(db)).interrupted_runs == 0);
}

TEST_CASE("integrity check reports a healthy database as ok", "[storage][recovery]") {
  fresh_db f;
  f.add_message(f.add_conversation(f.add_user("ann"), f.add_agent(), "c"), "user", "hello");
  must(check_integrity(f.db));
}

TEST_CASE("the read pool sees committed writes and lends each connection to one caller",
          "[storage][read_pool]") {
  fresh_db f;
  const auto user = f.add_user("ann");
  auto pool = must(read_pool::open(f.dir.db(), 2));
  CHECK(pool->size() == 2);
  CHECK(must(pool->with([&](connection& c) { return find_user(c, user); })).name == "ann");
  {
    auto a = pool->acquire();
    auto b = pool->acquire();
    CHECK(&*a != &*b);
    CHECK(a->read_only());
    auto write = a->run("DELETE FROM users");
    REQUIRE_FALSE(write);
    CHECK(write.error().code == errc::permission_denied);
  }
  f.add_user("bob");
  CHECK(must(pool->with([](connection& c) { return find_user_by_name(c, "bob"); })).id > user);
}

TEST_CASE("opening the read pool on a missing database fails clearly", "[storage][read_pool]") {
  temp_dir dir;
  auto pool = read_pool::open(dir.path() / "nope.db", 2);
  REQUIRE_FALSE(pool);
  CHECK_THAT(pool.error().message, Catch::Contains("nope.db"));
}
