#include <catch2/catch.hpp>

#include "storage/storage_fixture.hpp"
#include "troupe/storage/channel_archives.hpp"
#include "troupe/storage/channels.hpp"
#include "troupe/storage/repositories.hpp"

using namespace troupe;
using namespace troupe::storage;
using namespace troupe::storage::testing;

namespace {

row_id add_message(connection& db, row_id conversation, std::string role, std::string content,
                   std::string tool_calls_json = {}) {
  message_record m;
  m.conversation_id = conversation;
  m.role = std::move(role);
  m.content = std::move(content);
  m.tool_calls_json = std::move(tool_calls_json);
  return must(insert_message(db, m));
}

} // namespace

TEST_CASE("a channel archive is written from the conversation's messages and tool calls",
          "[storage][channels]") {
  fresh_db f;
  const auto agent = f.add_agent();
  const auto alice = must(ensure_channel_user(f.db, "channel:hooks:alice"));
  const auto conversation = f.add_conversation(alice, agent, "c1");
  CHECK(find_channel_archive(f.db, conversation).error().code == errc::not_found);
  add_message(f.db, conversation, "user", "Find the report\nplease");
  add_message(
      f.db, conversation, "assistant", "",
      R"([{"id":"a","name":"ls","arguments":"{}"},{"id":"b","name":"read","arguments":"{}"}])");
  add_message(f.db, conversation, "tool", "report.md");
  add_message(f.db, conversation, "assistant", "",
              R"([{"id":"c","name":"read","arguments":"{}"}])");
  add_message(f.db, conversation, "assistant", "It is in report.md.");
  add_message(f.db, conversation, "assistant", "", "not json");
  const auto written = must(write_channel_archive(f.db, conversation));
  CHECK(written.owner_user_id == alice);
  CHECK(written.conversation_uuid == "c1");
  CHECK(written.title == "Find the report");
  CHECK(written.message_count == 6);
  CHECK(written.summary == "# Find the report\n\n## Goals\n- Find the report\n\n## Tools used\n"
                           "- read \xC3\x97 2\n- ls \xC3\x97 1\n\n## Recent decisions\n"
                           "- It is in report.md.\n");
  // Rewritten in place as the conversation grows.
  add_message(f.db, conversation, "user", "Thanks");
  const auto again = must(write_channel_archive(f.db, conversation));
  CHECK(again.id == written.id);
  CHECK(again.message_count == 7);
  CHECK(must(find_channel_archive(f.db, conversation)).summary == again.summary);
}

TEST_CASE("a user's archives are listed newest first, without the current conversation",
          "[storage][channels]") {
  fresh_db f;
  const auto agent = f.add_agent();
  const auto alice = must(ensure_channel_user(f.db, "channel:hooks:alice"));
  const auto bob = must(ensure_channel_user(f.db, "channel:hooks:bob"));
  const auto c1 = f.add_conversation(alice, agent, "c1");
  const auto c2 = f.add_conversation(alice, agent, "c2");
  const auto c3 = f.add_conversation(bob, agent, "c3");
  for (auto c : {c1, c2, c3}) {
    add_message(f.db, c, "user", "topic " + std::to_string(c));
    must(write_channel_archive(f.db, c));
  }
  must(f.db.run("UPDATE channel_archives SET updated_at = 1000 WHERE conversation_id = ?", c1));
  must(f.db.run("UPDATE channel_archives SET updated_at = 2000 WHERE conversation_id = ?", c2));
  auto listed = must(list_channel_archives(f.db, alice, 0, 10));
  REQUIRE(listed.size() == 2);
  CHECK(listed[0].conversation_id == c2);
  CHECK(listed[1].conversation_id == c1);
  listed = must(list_channel_archives(f.db, alice, c2, 10));
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].conversation_id == c1);
  CHECK(must(list_channel_archives(f.db, alice, 0, 1)).size() == 1);
  CHECK(must(list_channel_archives(f.db, bob, 0, 10)).size() == 1);
  // Deleted with its conversation.
  must(f.db.run("DELETE FROM conversations WHERE id = ?", c1));
  CHECK(must(list_channel_archives(f.db, alice, 0, 10)).size() == 1);
}

TEST_CASE("a thread's dead letters are reported until its user was told of them",
          "[storage][channels]") {
  fresh_db f;
  const auto agent = f.add_agent();
  channel_record ch;
  ch.name = "hooks";
  ch.kind = "webhook";
  ch.agent_id = agent;
  ch.callback_url = "http://127.0.0.1:1/replies";
  const auto channel = must(insert_channel(f.db, ch));
  const auto alice = must(ensure_channel_user(f.db, "channel:hooks:alice"));
  channel_thread_record t;
  t.channel_id = channel;
  t.thread_key = "t-1";
  t.owner_user_id = alice;
  const auto thread = must(bind_channel_thread(f.db, t));
  outbox_record o;
  o.channel_id = channel;
  o.thread_id = thread.id;
  o.run_uuid = "run-1";
  o.text = "lost";
  const auto first = must(enqueue_outbox(f.db, o));
  o.part = 1;
  const auto second = must(enqueue_outbox(f.db, o));
  CHECK(must(unnotified_dead_letters(f.db, thread.id)).empty());
  must(mark_outbox_dead(f.db, first, "HTTP 400"));
  must(mark_outbox_dead(f.db, second, "HTTP 400"));
  auto dead = must(unnotified_dead_letters(f.db, thread.id));
  REQUIRE(dead.size() == 2);
  CHECK(dead[0].id == first);
  must(set_dead_letters_notified(f.db, thread.id, second));
  CHECK(must(unnotified_dead_letters(f.db, thread.id)).empty());
  // The mark never goes back.
  must(set_dead_letters_notified(f.db, thread.id, first));
  CHECK(must(unnotified_dead_letters(f.db, thread.id)).empty());
  // Rebinding the thread to another owner and conversation.
  const auto bob = must(ensure_channel_user(f.db, "channel:hooks:bob"));
  const auto c = f.add_conversation(bob, agent, "c-bob");
  must(set_thread_binding(f.db, thread.id, bob, c));
  const auto rebound = must(find_channel_thread_by_id(f.db, thread.id));
  CHECK(rebound.owner_user_id == bob);
  CHECK(rebound.conversation_id == c);
}
