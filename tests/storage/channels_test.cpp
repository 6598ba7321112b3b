#include <catch2/catch.hpp>

#include "storage/storage_fixture.hpp"
#include "troupe/storage/channels.hpp"
#include "troupe/storage/schema.hpp"

using namespace troupe;
using namespace troupe::storage;
using namespace troupe::storage::testing;

namespace {

channel_record webhook_channel(row_id agent, std::string name = "hooks") {
  channel_record ch;
  ch.name = std::move(name);
  ch.kind = "webhook";
  ch.agent_id = agent;
  ch.token_env = "TROUPE_KEY_HOOK";
  ch.callback_url = "http://127.0.0.1:1/replies";
  return ch;
}

inbound_record message(row_id channel, std::string id, std::string text = "hi") {
  inbound_record in;
  in.channel_id = channel;
  in.platform_message_id = std::move(id);
  in.thread_key = "t-1";
  in.sender = "alice";
  in.text = std::move(text);
  in.reply_to = "t-1";
  return in;
}

} // namespace

TEST_CASE("channels are stored by unique name with their settings", "[storage][channels]") {
  fresh_db f;
  const auto agent = f.add_agent();
  auto ch = webhook_channel(agent);
  ch.session_scope = "sender";
  ch.queue_policy = "collect";
  ch.stream_edits = true;
  const auto id = must(insert_channel(f.db, ch));
  auto found = must(find_channel_by_name(f.db, "hooks"));
  CHECK(found.id == id);
  CHECK(found.kind == "webhook");
  CHECK(found.token_env == "TROUPE_KEY_HOOK");
  CHECK(found.session_scope == "sender");
  CHECK(found.queue_policy == "collect");
  CHECK(found.stream_edits);
  CHECK_FALSE(found.declared);
  CHECK(insert_channel(f.db, ch).error().code == errc::conflict);
  // The database refuses a kind no adapter speaks.
  auto odd = webhook_channel(agent, "odd");
  odd.kind = "irc";
  CHECK_FALSE(insert_channel(f.db, odd));

  found.callback_url = "http://127.0.0.1:2/other";
  found.enabled = false;
  must(update_channel(f.db, found));
  CHECK(must(find_channel(f.db, id)).callback_url == "http://127.0.0.1:2/other");
  CHECK_FALSE(must(find_channel(f.db, id)).enabled);
  CHECK(must(list_channels(f.db)).size() == 1);
  must(delete_channel(f.db, id));
  CHECK(find_channel(f.db, id).error().code == errc::not_found);
  CHECK(delete_channel(f.db, id).error().code == errc::not_found);
}

TEST_CASE("a declared channel is upserted by name and never stores a token",
          "[storage][channels]") {
  fresh_db f;
  const auto agent = f.add_agent();
  auto ch = webhook_channel(agent);
  ch.token = "v1:sealed";
  const auto id = must(upsert_declared_channel(f.db, ch));
  ch.callback_url = "http://127.0.0.1:3/changed";
  CHECK(must(upsert_declared_channel(f.db, ch)) == id);
  const auto found = must(find_channel(f.db, id));
  CHECK(found.declared);
  CHECK(found.token.empty());
  CHECK(found.callback_url == "http://127.0.0.1:3/changed");
}

TEST_CASE("a channel sender's identity is one user, created once", "[storage][channels]") {
  fresh_db f;
  const auto a = must(ensure_channel_user(f.db, "channel:hooks:alice"));
  CHECK(must(ensure_channel_user(f.db, "channel:hooks:alice")) == a);
  const auto b = must(ensure_channel_user(f.db, "channel:hooks:bob"));
  CHECK(b != a);
  CHECK(must(find_user(f.db, a)).name == "channel:hooks:alice");
}

TEST_CASE("the first binding of a channel thread wins and a rebind is explicit",
          "[storage][channels]") {
  fresh_db f;
  const auto agent = f.add_agent();
  const auto channel = must(insert_channel(f.db, webhook_channel(agent)));
  const auto alice = must(ensure_channel_user(f.db, "channel:hooks:alice"));
  const auto c1 = f.add_conversation(alice, agent, "c1");
  const auto c2 = f.add_conversation(alice, agent, "c2");
  channel_thread_record t;
  t.channel_id = channel;
  t.thread_key = "t-1";
  t.owner_user_id = alice;
  t.conversation_id = c1;
  t.reply_to = "t-1";
  const auto first = must(bind_channel_thread(f.db, t));
  CHECK(first.conversation_id == c1);
  // Two first messages racing: the second binding finds the first, unchanged.
  t.conversation_id = c2;
  const auto second = must(bind_channel_thread(f.db, t));
  CHECK(second.id == first.id);
  CHECK(second.conversation_id == c1);
  must(set_thread_conversation(f.db, first.id, c2));
  CHECK(must(find_channel_thread(f.db, channel, "t-1")).conversation_id == c2);
  t.thread_key = "t-2";
  must(bind_channel_thread(f.db, t));
  CHECK(must(list_channel_threads(f.db, channel, 10, 0)).size() == 2);
  CHECK(must(list_channel_threads(f.db, channel, 1, 1)).size() == 1);
}

TEST_CASE("a redelivered platform message is a duplicate, also after the file is reopened",
          "[storage][channels]") {
  temp_dir dir;
  row_id channel = 0;
  row_id first_id = 0;
  {
    auto db = must(open_writer(dir.db(), sync_mode::normal));
    agent_record a;
    a.uuid = "agent-1";
    a.name = "helper";
    a.main_model = "m";
    const auto agent = must(insert_agent(db, a));
    channel = must(insert_channel(db, webhook_channel(agent)));
    const auto first = must(journal_inbound(db, message(channel, "m-1")));
    CHECK_FALSE(first.duplicate);
    first_id = first.id;
    const auto again = must(journal_inbound(db, message(channel, "m-1")));
    CHECK(again.duplicate);
    CHECK(again.id == first.id);
    must(set_inbound_status(db, first.id, "processing", "run-1"));
  }
  // A restart: a new connection to the same file.
  auto db = must(open_writer(dir.db(), sync_mode::normal));
  const auto after = must(journal_inbound(db, message(channel, "m-1", "hi again")));
  CHECK(after.duplicate);
  CHECK(after.id == first_id);
  const auto stored = must(find_inbound(db, first_id));
  CHECK(stored.text == "hi");
  CHECK(stored.status == "processing");
  CHECK(stored.run_uuid == "run-1");
  CHECK(must(count_inbound(db, channel)) == 1);
  CHECK(must(list_inbound(db, channel, "processing")).size() == 1);
  CHECK(must(list_inbound(db, 0, "processing")).size() == 1);
  // A status change without a run keeps the run it had.
  must(set_inbound_status(db, first_id, "done"));
  CHECK(must(find_inbound(db, first_id)).run_uuid == "run-1");
  CHECK(must(list_inbound(db, channel, "processing")).empty());
}

TEST_CASE("the outbox records a (run, part) once, claims it before sending, retries and "
          "dead-letters",
          "[storage][channels]") {
  fresh_db f;
  const auto agent = f.add_agent();
  const auto channel = must(insert_channel(f.db, webhook_channel(agent)));
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
  o.part = 0;
  o.text = "hello";
  const auto id = must(enqueue_outbox(f.db, o));
  CHECK(must(enqueue_outbox(f.db, o)) == id);
  o.part = 1;
  const auto second = must(enqueue_outbox(f.db, o));
  CHECK(second != id);
  CHECK(must(find_outbox_part(f.db, "run-1", 1)).id == second);
  CHECK(find_outbox_part(f.db, "run-1", 5).error().code == errc::not_found);

  must(claim_outbox(f.db, id));
  // Claimed once: a second sender (or a restart's recovery) cannot take it as pending.
  CHECK(claim_outbox(f.db, id).error().code == errc::conflict);
  CHECK(must(list_outbox_with_status(f.db, "sending")).size() == 1);
  must(mark_outbox_sent(f.db, id, "platform-7"));
  const auto sent = must(find_outbox(f.db, id));
  CHECK(sent.status == "sent");
  CHECK(sent.attempts == 1);
  CHECK(sent.platform_message_id == "platform-7");
  CHECK(sent.sent_at.has_value());
  CHECK(claim_outbox(f.db, id).error().code == errc::conflict);

  must(claim_outbox(f.db, second));
  must(record_outbox_failure(f.db, second, "429 retry after 2 s", 12345, 2));
  auto retry = must(find_outbox(f.db, second));
  CHECK(retry.status == "pending");
  CHECK(retry.next_attempt_at == 12345);
  CHECK(retry.last_error == "429 retry after 2 s");
  must(claim_outbox(f.db, second));
  must(record_outbox_failure(f.db, second, "503", 0, 2));
  auto dead = must(find_outbox(f.db, second));
  CHECK(dead.status == "dead");
  CHECK(dead.attempts == 2);
  CHECK(dead.last_error == "503");
  CHECK(must(list_outbox(f.db, channel, "dead")).size() == 1);
  CHECK(must(list_outbox(f.db, channel, "")).size() == 2);

  o.part = 2;
  const auto third = must(enqueue_outbox(f.db, o));
  must(mark_outbox_dead(f.db, third, "400 bad request"));
  CHECK(must(find_outbox(f.db, third)).status == "dead");
}

TEST_CASE("deleting a channel deletes its threads, journal and outbox", "[storage][channels]") {
  fresh_db f;
  const auto agent = f.add_agent();
  const auto channel = must(insert_channel(f.db, webhook_channel(agent)));
  const auto alice = must(ensure_channel_user(f.db, "channel:hooks:alice"));
  channel_thread_record t;
  t.channel_id = channel;
  t.thread_key = "t-1";
  t.owner_user_id = alice;
  const auto thread = must(bind_channel_thread(f.db, t));
  must(journal_inbound(f.db, message(channel, "m-1")));
  outbox_record o;
  o.channel_id = channel;
  o.thread_id = thread.id;
  o.run_uuid = "run-1";
  o.text = "x";
  must(enqueue_outbox(f.db, o));
  must(delete_channel(f.db, channel));
  CHECK(must(f.db.query_int("SELECT COUNT(*) FROM channel_threads")) == 0);
  CHECK(must(f.db.query_int("SELECT COUNT(*) FROM inbound_journal")) == 0);
  CHECK(must(f.db.query_int("SELECT COUNT(*) FROM outbox")) == 0);
}

TEST_CASE("declared channels are synced by name and need a known agent", "[storage][channels]") {
  fresh_db f;
  agent_record a;
  a.uuid = "agent-1";
  a.name = "assistant";
  a.main_model = "m";
  const auto agent = must(insert_agent(f.db, a));
  channel_settings hook;
  hook.name = "hooks";
  hook.type = channel_type::webhook;
  hook.agent = "assistant";
  hook.token = "inline-secret";
  hook.callback_url = "http://127.0.0.1:1/replies";
  CHECK(must(sync_declared_channels(f.db, {hook})) == 1);
  auto stored = must(find_channel_by_name(f.db, "hooks"));
  CHECK(stored.agent_id == agent);
  CHECK(stored.declared);
  CHECK(stored.token.empty()); // the inline token stays in the config
  hook.scope = session_scope::sender;
  CHECK(must(sync_declared_channels(f.db, {hook})) == 1);
  CHECK(must(find_channel_by_name(f.db, "hooks")).session_scope == "sender");
  CHECK(must(list_channels(f.db)).size() == 1);
  hook.agent = "nobody";
  auto refused = sync_declared_channels(f.db, {hook});
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message, Catch::Contains("channel 'hooks': no agent 'nobody'"));
}
