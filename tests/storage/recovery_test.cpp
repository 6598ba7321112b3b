#include <catch2/catch.hpp>

#include "storage/storage_fixture.hpp"
#include "troupe/storage/approvals.hpp"

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

TEST_CASE("recovery keeps a top-level run that waits for an approval running, and expires the "
          "approvals of the runs it marks interrupted",
          "[storage][recovery][approval]") {
  temp_dir dir;
  row_id paused_id = 0;
  row_id child_id = 0;
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
    r.uuid = "paused";
    paused_id = must(insert_run(db, r));
    must(set_run_status(db, paused_id, run_status::running));
    r.uuid = "child";
    r.parent_run_id = paused_id;
    child_id = must(insert_run(db, r));
    must(set_run_status(db, child_id, run_status::running));
    for (const auto* run : {"paused", "child"}) {
      approval_record ap;
      ap.uuid = std::string("approval-of-") + run;
      ap.run_uuid = run;
      ap.owner_user_id = user;
      ap.tool = "notify";
      ap.round_json = R"({"round":1})";
      ap.created_at = 1;
      ap.expires_at = 2;
      must(insert_approval(db, ap));
    }
  } // the process "dies" here, both runs waiting for a human

  auto db = must(open_writer(dir.db(), sync_mode::normal));
  auto report = must(recover(db));
  CHECK(report.paused_runs == 1);
  CHECK(report.interrupted_runs == 1);
  CHECK(must(find_run(db, paused_id)).status == run_status::running);
  CHECK(must(list_steps(db, paused_id)).empty());
  const auto kept = must(find_approval(db, "approval-of-paused"));
  CHECK(kept.status == "pending");
  CHECK(kept.round_json == R"({"round":1})");
  // A sub-agent's run goes with its parent's round: interrupted, its approval expired.
  CHECK(must(find_run(db, child_id)).status == run_status::interrupted);
  const auto gone = must(find_approval(db, "approval-of-child"));
  CHECK(gone.status == "expired");
  CHECK_THAT(gone.note, Catch::Contains("not resumed"));
  // Saved rounds go to the pending approvals only.
  must(save_paused_round(db, "paused", R"({"round":2})"));
  must(save_paused_round(db, "child", R"({"round":2})"));
  CHECK(must(find_approval(db, "approval-of-paused")).round_json == R"({"round":2})");
  CHECK(must(find_approval(db, "approval-of-child")).round_json == R"({"round":1})");
  CHECK(must(list_run_approvals(db, "paused")).size() == 1);
  // Recovering again keeps it waiting.
  CHECK(must(recover(db)).paused_runs == 1);
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
