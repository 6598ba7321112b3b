#include <catch2/catch.hpp>

#include "storage/storage_fixture.hpp"
#include "support/wait_until.hpp"
#include "troupe/actors/node.hpp"

using namespace troupe;
using namespace troupe::storage;
using namespace troupe::storage::testing;
using namespace std::chrono_literals;

TEST_CASE("a starting node recovers interrupted runs and writes through its store writer",
          "[actors][store_writer][node]") {
  temp_dir dir;
  row_id run_id = 0;
  row_id conversation = 0;
  {
    auto db = must(open_writer(database_path(dir.path()), sync_mode::normal));
    user_record u;
    u.name = "ann";
    agent_record a;
    a.uuid = "a";
    a.name = "a";
    a.main_model = "m";
    conversation_record c;
    c.uuid = "c";
    c.owner_user_id = must(insert_user(db, u));
    c.agent_id = must(insert_agent(db, a));
    conversation = must(insert_conversation(db, c));
    run_record r;
    r.uuid = "r";
    r.conversation_id = conversation;
    r.agent_id = c.agent_id;
    r.status = run_status::running;
    run_id = must(insert_run(db, r));
  }
  settings config;
  config.data_dir = dir.path();
  config.listen = must(parse_endpoint("127.0.0.1:0"));
  config.storage.synchronous = "full";
  actors::node node(config);
  must(node.start().map([](const endpoint&) {}));
  auto reads = node.read_pool();
  REQUIRE(reads);
  CHECK(must(reads->with([&](connection& c) { return find_run(c, run_id); })).status ==
        run_status::interrupted);
  message_record m;
  m.conversation_id = conversation;
  m.role = "user";
  m.content = "through the node";
  auto id =
      must(actors::write_blocking(node.system(), node.store_writer(), append_message_op(m), 10s));
  CHECK(must(reads->with([&](connection& c) { return find_message(c, id); })).content ==
        "through the node");
  node.stop();
  node.wait();
}

TEST_CASE("a starting node resumes a run that was accepted but had not started",
          "[actors][node][durable]") {
  temp_dir dir;
  settings config;
  config.data_dir = dir.path();
  config.listen = must(parse_endpoint("127.0.0.1:0"));
  {
    // The first start lays out the embedded catalog (the demo agent "assistant").
    actors::node first(config);
    must(first.start().map([](const endpoint&) {}));
    first.stop();
    first.wait();
  }
  row_id run = 0;
  {
    // What a stop leaves of an accepted turn: a queued run row and its user message.
    auto db = must(open_writer(database_path(dir.path()), sync_mode::normal));
    const auto agent = must(find_agent_by_name(db, "assistant"));
    user_record u;
    u.name = "ann";
    conversation_record c;
    c.uuid = "conv-left-behind";
    c.owner_user_id = must(insert_user(db, u));
    c.agent_id = agent.id;
    const auto conversation = must(insert_conversation(db, c));
    run_record r;
    r.uuid = "run-left-queued";
    r.conversation_id = conversation;
    r.agent_id = agent.id;
    run = must(insert_run(db, r));
    message_record m;
    m.conversation_id = conversation;
    m.run_id = run;
    m.role = "user";
    m.content = "hello after the restart";
    must(insert_message(db, m));
  }
  actors::node node(config);
  must(node.start().map([](const endpoint&) {}));
  auto reads = node.read_pool();
  REQUIRE(reads);
  const auto status = [&] {
    return must(reads->with([&](connection& c) { return find_run(c, run); })).status;
  };
  CHECK(troupe::test::wait_until(
      [&] { return status() != run_status::queued && status() != run_status::running; }, 30s));
  CHECK(status() == run_status::succeeded);
  node.stop();
  node.wait();
}

TEST_CASE("a node refuses to start on a database newer than the binary",
          "[actors][store_writer][node]") {
  temp_dir dir;
  {
    auto db = must(open_writer(database_path(dir.path()), sync_mode::normal));
    must(db.exec("PRAGMA user_version = 1000"));
  }
  settings config;
  config.data_dir = dir.path();
  config.listen = must(parse_endpoint("127.0.0.1:0"));
  actors::node node(config);
  auto started = node.start();
  REQUIRE_FALSE(started);
  CHECK_THAT(started.error().message, Catch::Contains("newer than this troupe binary"));
}
