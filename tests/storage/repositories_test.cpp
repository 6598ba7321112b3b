#include <catch2/catch.hpp>

#include "storage/storage_fixture.hpp"

using namespace troupe;
using namespace troupe::storage;
using namespace troupe::storage::testing;

TEST_CASE("users are stored, found by id and name, and names are unique",
          "[storage][repositories]") {
  fresh_db f;
  user_record u;
  u.name = "ann";
  u.display_name = "Ann";
  u.role = "admin";
  const auto id = must(insert_user(f.db, u));
  auto by_id = must(find_user(f.db, id));
  CHECK(by_id.name == "ann");
  CHECK(by_id.role == "admin");
  CHECK(by_id.created_at > 0);
  CHECK(must(find_user_by_name(f.db, "ann")).id == id);
  auto dup = insert_user(f.db, u);
  REQUIRE_FALSE(dup);
  CHECK(dup.error().code == errc::conflict);
  auto missing = find_user(f.db, 999);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == errc::not_found);
}

TEST_CASE("a revoked API token is no longer found", "[storage][repositories]") {
  fresh_db f;
  const auto user = f.add_user("ann");
  api_token_record t;
  t.user_id = user;
  t.name = "laptop";
  t.token_hash = "sha256:abc";
  const auto id = must(insert_api_token(f.db, t));
  CHECK(must(find_api_token(f.db, "sha256:abc")).user_id == user);
  must(revoke_api_token(f.db, id));
  CHECK(find_api_token(f.db, "sha256:abc").error().code == errc::not_found);
  CHECK(revoke_api_token(f.db, id).error().code == errc::not_found);
}

TEST_CASE("providers and agents keep their main, fast and fallback models",
          "[storage][repositories]") {
  fresh_db f;
  provider_record p;
  p.name = "openai";
  p.kind = "openai";
  p.api_key_ref = "OPENAI_API_KEY";
  const auto pid = must(insert_provider(f.db, p));
  CHECK(must(find_provider(f.db, pid)).api_key_ref == "OPENAI_API_KEY");
  agent_record a;
  a.uuid = "a-1";
  a.name = "coder";
  a.provider_id = pid;
  a.main_model = "big";
  a.fast_model = "small";
  a.fallback_model = "other";
  a.tools_json = R"(["shell"])";
  a.limits_json = R"({"max_rounds":8})";
  a.queue_policy = "steer";
  const auto aid = must(insert_agent(f.db, a));
  auto got = must(find_agent_by_uuid(f.db, "a-1"));
  CHECK(got.id == aid);
  CHECK(got.provider_id == pid);
  CHECK(got.main_model == "big");
  CHECK(got.fast_model == "small");
  CHECK(got.fallback_model == "other");
  CHECK(got.tools_json == R"(["shell"])");
  CHECK(got.limits_json == R"({"max_rounds":8})");
  CHECK(got.queue_policy == "steer");
  a.uuid = "a-2";
  a.queue_policy = "whenever";
  CHECK_FALSE(insert_agent(f.db, a));
}

TEST_CASE("a conversation is found by uuid only by its owner", "[storage][repositories]") {
  fresh_db f;
  const auto ann = f.add_user("ann");
  const auto bob = f.add_user("bob");
  const auto agent = f.add_agent();
  const auto id = f.add_conversation(ann, agent, "conv-1");
  f.add_conversation(ann, agent, "conv-2");
  CHECK(must(find_conversation_by_uuid(f.db, "conv-1", ann)).id == id);
  CHECK(find_conversation_by_uuid(f.db, "conv-1", bob).error().code == errc::not_found);
  CHECK(must(list_conversations(f.db, ann, 10)).size() == 2);
  CHECK(must(list_conversations(f.db, bob, 10)).empty());
}

TEST_CASE("messages keep role, tool calls, tool results and token counts in order",
          "[storage][repositories]") {
  fresh_db f;
  const auto user = f.add_user("ann");
  const auto conv = f.add_conversation(user, f.add_agent(), "c");
  message_record m;
  m.conversation_id = conv;
  m.role = "assistant";
  m.content = "calling a tool";
  m.tool_calls_json = R"([{"id":"call_1","name":"shell"}])";
  m.prompt_tokens = 120;
  m.completion_tokens = 7;
  const auto first = must(insert_message(f.db, m));
  message_record t;
  t.conversation_id = conv;
  t.role = "tool";
  t.tool_call_id = "call_1";
  t.content = "ok";
  t.tool_results_json = R"({"exit":0})";
  const auto second = must(insert_message(f.db, t));
  f.add_message(conv, "user", "third");
  auto all = must(list_messages(f.db, conv));
  REQUIRE(all.size() == 3);
  CHECK(all[0].id == first);
  CHECK(all[0].tool_calls_json == m.tool_calls_json);
  CHECK(all[0].prompt_tokens == 120);
  CHECK(all[0].owner_user_id == user);
  CHECK(all[0].completion_tokens == 7);
  CHECK(all[1].id == second);
  CHECK(all[1].tool_call_id == "call_1");
  CHECK(all[1].tool_results_json == R"({"exit":0})");
  auto last_two = must(list_messages(f.db, conv, 2));
  REQUIRE(last_two.size() == 2);
  CHECK(last_two[0].id == second);
  CHECK(last_two[1].content == "third");
  must(update_message_content(f.db, second, "edited"));
  CHECK(must(find_message(f.db, second)).content == "edited");
  must(delete_message(f.db, second));
  CHECK(find_message(f.db, second).error().code == errc::not_found);
  CHECK(delete_message(f.db, second).error().code == errc::not_found);
}

TEST_CASE("a conversation's messages are paged oldest first with their total and a run's "
          "final answer is found without reading the page",
          "[storage][repositories]") {
  fresh_db f;
  const auto user = f.add_user("ann");
  const auto agent = f.add_agent();
  const auto conv = f.add_conversation(user, agent, "c");
  const auto run = f.add_run(conv, agent, "run-1");
  CHECK(must(final_answer_id(f.db, run)) == 0);
  std::vector<row_id> ids;
  for (int i = 0; i < 5; ++i) {
    message_record m;
    m.conversation_id = conv;
    m.run_id = run;
    m.role = "assistant";
    m.content = "m" + std::to_string(i);
    // Messages 1 and 3 are tool calls; 4 is the last plain answer, 2 an earlier one.
    if (i % 2 == 1) {
      m.tool_calls_json = R"([{"id":"c"}])";
    }
    ids.push_back(must(insert_message(f.db, m)));
  }
  const auto page_of = [&](std::int64_t limit, std::int64_t offset) {
    return must(list_messages_page(f.db, conv, page{limit, offset}));
  };
  auto middle = page_of(2, 1);
  REQUIRE(middle.size() == 2);
  CHECK(middle[0].content == "m1");
  CHECK(middle[1].content == "m2");
  CHECK(page_of(10, 4).size() == 1);
  CHECK(page_of(10, 5).empty());
  CHECK(must(count_messages(f.db, conv)).count == 5);
  CHECK(must(final_answer_id(f.db, run)) == ids[4]);
}

TEST_CASE("a user's files are paged newest first with their total", "[storage][repositories]") {
  fresh_db f;
  const auto ann = f.add_user("ann");
  const auto bob = f.add_user("bob");
  for (int i = 0; i < 4; ++i) {
    file_record file;
    file.uuid = "file-" + std::to_string(i);
    file.owner_user_id = i == 3 ? bob : ann;
    file.kind = "artifact";
    file.name = "f" + std::to_string(i);
    file.storage_path = "files/" + file.uuid;
    must(insert_file(f.db, file));
  }
  auto first = must(list_files_page(f.db, ann, page{2, 0}));
  REQUIRE(first.size() == 2);
  CHECK(first[0].name == "f2");
  CHECK(first[1].name == "f1");
  auto rest = must(list_files_page(f.db, ann, page{2, 2}));
  REQUIRE(rest.size() == 1);
  CHECK(rest[0].name == "f0");
  CHECK(must(count_files(f.db, ann)).count == 3);
  CHECK(must(count_files(f.db, bob)).count == 1);
}

TEST_CASE("queued runs are listed with their conversation and joined user messages",
          "[storage][repositories]") {
  fresh_db f;
  const auto user = f.add_user("ann");
  const auto agent = f.add_agent();
  const auto conv = f.add_conversation(user, agent, "c");
  f.add_run(conv, agent, "done", run_status::succeeded);
  const auto waiting = f.add_run(conv, agent, "waiting");
  for (const auto* text : {"first", "second"}) {
    message_record m;
    m.conversation_id = conv;
    m.run_id = waiting;
    m.role = "user";
    m.content = text;
    must(insert_message(f.db, m));
  }
  auto turns = must(list_queued_turns(f.db));
  REQUIRE(turns.size() == 1);
  CHECK(turns[0].run.uuid == "waiting");
  CHECK(turns[0].conversation.uuid == "c");
  CHECK(turns[0].text == "first\n\nsecond");
  CHECK(must(queued_run_ids(f.db, conv)) == std::vector<row_id>{waiting});
  CHECK(must(queued_run_ids(f.db, conv + 1)).empty());
}

TEST_CASE("run status changes stamp start and finish times", "[storage][repositories]") {
  fresh_db f;
  const auto user = f.add_user("ann");
  const auto agent = f.add_agent();
  const auto conv = f.add_conversation(user, agent, "c");
  const auto id = f.add_run(conv, agent, "run-1");
  CHECK(must(find_run(f.db, id)).status == run_status::queued);
  must(set_run_status(f.db, id, run_status::running));
  auto running = must(find_run(f.db, id));
  CHECK(running.status == run_status::running);
  CHECK(running.started_at.has_value());
  CHECK_FALSE(running.finished_at.has_value());
  CHECK(must(list_runs_with_status(f.db, run_status::running)).size() == 1);
  must(set_run_status(f.db, id, run_status::failed, "model timed out"));
  auto failed = must(find_run(f.db, id));
  CHECK(failed.status == run_status::failed);
  CHECK(failed.error == "model timed out");
  CHECK(failed.finished_at.has_value());
  CHECK(set_run_status(f.db, 999, run_status::running).error().code == errc::not_found);
  CHECK(parse_run_status("interrupted").value() == run_status::interrupted);
  CHECK_FALSE(parse_run_status("paused"));
}

TEST_CASE("execution steps are numbered per run in order", "[storage][repositories]") {
  fresh_db f;
  const auto user = f.add_user("ann");
  const auto agent = f.add_agent();
  const auto conv = f.add_conversation(user, agent, "c");
  run_record r;
  r.conversation_id = conv;
  r.agent_id = agent;
  r.uuid = "r1";
  const auto run1 = must(insert_run(f.db, r));
  r.uuid = "r2";
  const auto run2 = must(insert_run(f.db, r));
  for (const char* kind : {"llm", "tool", "gate"}) {
    execution_step_record s;
    s.run_id = run1;
    s.kind = kind;
    must(append_step(f.db, s));
  }
  execution_step_record other;
  other.run_id = run2;
  other.kind = "llm";
  must(append_step(f.db, other));
  auto steps = must(list_steps(f.db, run1));
  REQUIRE(steps.size() == 3);
  CHECK(steps[0].seq == 1);
  CHECK(steps[2].seq == 3);
  CHECK(steps[2].kind == "gate");
  CHECK(must(list_steps(f.db, run2)).at(0).seq == 1);
}

TEST_CASE("a run's journal entries are stored under their own ids and read back after one",
          "[storage][repositories]") {
  fresh_db f;
  const auto agent = f.add_agent();
  const auto conv = f.add_conversation(f.add_user("ann"), agent, "c1");
  const auto run = f.add_run(conv, agent, "run-1", run_status::running);
  const std::vector<run_event_view> first = {{1, "run", R"({"type":"run.started"})"},
                                             {2, "message", R"({"type":"model.delta"})"}};
  const std::vector<run_event_view> last = {{3, "done", R"({"status":"succeeded"})"},
                                            {4, "", "[DONE]"}};
  CHECK(must(append_run_events(f.db, "run-1", first)) == 2);
  CHECK(must(append_run_events(f.db, "run-1", last)) == 2);
  auto all = must(list_run_events(f.db, run));
  REQUIRE(all.size() == 4);
  for (std::size_t i = 0; i < all.size(); ++i) {
    CHECK(all[i].seq == static_cast<std::int64_t>(i + 1));
  }
  CHECK(all[0].event == "run");
  CHECK(all[3].event.empty());
  CHECK(all[3].data == "[DONE]");
  auto after = must(list_run_events(f.db, run, 2));
  REQUIRE(after.size() == 2);
  CHECK(after.front().seq == 3);
  CHECK(after.front().data == R"({"status":"succeeded"})");
  // An id is stored once: the same entry again is refused.
  CHECK_FALSE(append_run_events(f.db, "run-1", last));
  // A run with no row keeps nothing.
  CHECK(must(append_run_events(f.db, "no-such-run", first)) == 0);
}

TEST_CASE("deleting a conversation deletes its runs' journal entries", "[storage][repositories]") {
  fresh_db f;
  const auto agent = f.add_agent();
  const auto user = f.add_user("ann");
  const auto gone = f.add_conversation(user, agent, "c1");
  const auto kept = f.add_conversation(user, agent, "c2");
  f.add_run(gone, agent, "run-gone", run_status::succeeded);
  const auto kept_run = f.add_run(kept, agent, "run-kept", run_status::succeeded);
  const std::vector<run_event_view> events = {{1, "done", "{}"}, {2, "", "[DONE]"}};
  must(append_run_events(f.db, "run-gone", events));
  must(append_run_events(f.db, "run-kept", events));
  CHECK(must(f.db.query_int("SELECT count(*) FROM run_events")) == 4);
  must(delete_conversation(f.db, gone));
  CHECK(must(f.db.query_int("SELECT count(*) FROM run_events")) == 2);
  CHECK(must(list_run_events(f.db, kept_run)).size() == 2);
}

TEST_CASE("a plan allows only one running item at a time", "[storage][repositories]") {
  fresh_db f;
  const auto user = f.add_user("ann");
  const auto agent = f.add_agent();
  run_record r;
  r.conversation_id = f.add_conversation(user, agent, "c");
  r.agent_id = agent;
  r.uuid = "r1";
  plan_record p;
  p.run_id = must(insert_run(f.db, r));
  p.goal = "ship it";
  const auto plan = must(insert_plan(f.db, p));
  plan_item_record a;
  a.plan_id = plan;
  a.position = 1;
  a.title = "build";
  const auto first = must(insert_plan_item(f.db, a));
  a.position = 2;
  a.title = "test";
  const auto second = must(insert_plan_item(f.db, a));
  must(set_plan_item_status(f.db, first, "running"));
  auto clash = set_plan_item_status(f.db, second, "running");
  REQUIRE_FALSE(clash);
  CHECK(clash.error().code == errc::conflict);
  must(set_plan_item_status(f.db, first, "completed", "built"));
  must(set_plan_item_status(f.db, second, "running"));
  auto items = must(list_plan_items(f.db, plan));
  REQUIRE(items.size() == 2);
  CHECK(items[0].status == "completed");
  CHECK(items[0].note == "built");
  CHECK(items[1].status == "running");
  CHECK_FALSE(set_plan_item_status(f.db, first, "daydreaming"));
}

TEST_CASE("files are visible only to their owner", "[storage][repositories]") {
  fresh_db f;
  const auto ann = f.add_user("ann");
  const auto bob = f.add_user("bob");
  file_record file;
  file.uuid = "file-1";
  file.owner_user_id = ann;
  file.kind = "artifact";
  file.name = "report.pdf";
  file.size_bytes = 1234;
  file.storage_path = "files/ab/file-1";
  must(insert_file(f.db, file));
  CHECK(must(find_file(f.db, "file-1", ann)).size_bytes == 1234);
  CHECK(find_file(f.db, "file-1", bob).error().code == errc::not_found);
  CHECK(must(list_files(f.db, bob)).empty());
  file.uuid = "file-2";
  file.kind = "download";
  CHECK_FALSE(insert_file(f.db, file));
}

TEST_CASE("memory items keep revisions and evidence and identical upserts are no-ops",
          "[storage][repositories][memory]") {
  fresh_db f;
  const auto user = f.add_user("ann");
  memory_item_record m;
  m.uuid = "m-1";
  m.user_id = user;
  m.kind = "preference";
  m.memory_key = "editor";
  m.content = "prefers vim";
  m.status = "active";
  const auto id = must(insert_memory_item(f.db, m, "user"));
  m.uuid = "m-1b";
  CHECK(must(insert_memory_item(f.db, m, "agent")) == id); // identical: no-op
  m.content = "prefers emacs";
  auto clash = insert_memory_item(f.db, m, "agent");
  REQUIRE_FALSE(clash);
  CHECK(clash.error().code == errc::conflict);
  must(set_memory_status(f.db, id, "dismissed", "dismissed", "user"));
  CHECK(must(find_memory_item(f.db, id)).status == "dismissed");
  // Once dismissed, the key is free again.
  const auto replacement = must(insert_memory_item(f.db, m, "agent"));
  CHECK(replacement != id);
  auto revisions = must(list_memory_revisions(f.db, id));
  REQUIRE(revisions.size() == 2);
  CHECK(revisions[0].action == "created");
  CHECK(revisions[1].action == "dismissed");
  CHECK(revisions[1].status == "dismissed");
  memory_evidence_record e;
  e.memory_id = id;
  e.relation = "source";
  e.source = "chat";
  must(insert_memory_evidence(f.db, e));
  CHECK(must(list_memory_evidence(f.db, id)).size() == 1);
  // A sensitive memory stays a candidate whatever was asked for.
  memory_item_record s;
  s.uuid = "m-2";
  s.user_id = user;
  s.memory_key = "health";
  s.content = "allergic to nuts";
  s.sensitivity = "sensitive";
  s.status = "active";
  CHECK(must(find_memory_item(f.db, must(insert_memory_item(f.db, s, "agent")))).status ==
        "candidate");
}

TEST_CASE("tools, MCP servers and search engines are stored and listed",
          "[storage][repositories]") {
  fresh_db f;
  tool_record t;
  t.name = "shell";
  t.kind = "builtin";
  t.schema_json = R"({"type":"object"})";
  must(insert_tool(f.db, t));
  CHECK(must(find_tool(f.db, "shell")).schema_json == R"({"type":"object"})");
  CHECK(must(list_tools(f.db)).size() == 1);
  t.name = "weird";
  t.kind = "telepathy";
  CHECK_FALSE(insert_tool(f.db, t));

  mcp_server_record m;
  m.name = "fs";
  m.transport = "stdio";
  m.endpoint = "npx @modelcontextprotocol/server-filesystem /tmp";
  must(insert_mcp_server(f.db, m));
  CHECK(must(find_mcp_server(f.db, "fs")).transport == "stdio");
  CHECK(must(list_mcp_servers(f.db)).size() == 1);

  search_engine_record e;
  e.name = "searx";
  e.kind = "searxng";
  e.is_default = true;
  must(insert_search_engine(f.db, e));
  e.name = "brave";
  e.kind = "brave";
  auto two_defaults = insert_search_engine(f.db, e);
  REQUIRE_FALSE(two_defaults);
  CHECK(two_defaults.error().code == errc::conflict);
  e.is_default = false;
  must(insert_search_engine(f.db, e));
  CHECK(must(find_default_search_engine(f.db)).name == "searx");
  CHECK(must(list_search_engines(f.db)).size() == 2);
}
