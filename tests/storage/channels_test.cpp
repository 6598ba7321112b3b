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

TEST_CASE("a journaled channel message is found by its run, the first of a run several joined",
          "[storage][channels]") {
  temp_dir dir;
  auto db = must(open_writer(dir.db(), sync_mode::normal));
  agent_record a;
  a.uuid = "agent-1";
  a.name = "helper";
  a.main_model = "m";
  const auto channel = must(insert_channel(db, webhook_channel(must(insert_agent(db, a)))));
  auto first = message(channel, "m-1");
  first.run_uuid = "run-1";
  auto joined = message(channel, "m-2");
  joined.sender = "bob";
  joined.run_uuid = "run-2";
  const auto first_id = must(journal_inbound(db, first)).id;
  const auto joined_id = must(journal_inbound(db, joined)).id;
  CHECK(must(find_inbound_by_run(db, "run-2")).id == joined_id);
  // Bob's message joined alice's run (collect): the run's first message is alice's.
  must(set_inbound_status(db, joined_id, "processing", "run-1"));
  const auto found = must(find_inbound_by_run(db, "run-1"));
  CHECK(found.id == first_id);
  CHECK(found.sender == "alice");
  const auto none = find_inbound_by_run(db, "run-2");
  REQUIRE_FALSE(none);
  CHECK(none.error().code == errc::not_found);
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

TEST_CASE("a delivery id is a second dedupe key, given up by a row older than its lifetime",
          "[storage][channels]") {
  fresh_db f;
  const auto agent = f.add_agent();
  const auto channel = must(insert_channel(f.db, webhook_channel(agent)));
  auto first = message(channel, "1001:5");
  first.delivery_id = "update:70";
  const auto a = must(journal_inbound(f.db, first));
  CHECK_FALSE(a.duplicate);
  CHECK(must(find_inbound(f.db, a.id)).delivery_id == "update:70");
  // The same update with another message key (not how Telegram numbers them, but a
  // platform's delivery id must hold on its own): a duplicate.
  auto same_update = message(channel, "1001:6");
  same_update.delivery_id = "update:70";
  const auto b = must(journal_inbound(f.db, same_update));
  CHECK(b.duplicate);
  CHECK(b.id == a.id);
  // The same message under a new update id (after Telegram's renumbering): a duplicate.
  auto same_message = message(channel, "1001:5");
  same_message.delivery_id = "update:9000";
  CHECK(must(journal_inbound(f.db, same_message)).duplicate);
  // Another channel has its own keys.
  const auto other = must(insert_channel(f.db, webhook_channel(agent, "other")));
  auto elsewhere = message(other, "1001:5");
  elsewhere.delivery_id = "update:70";
  CHECK_FALSE(must(journal_inbound(f.db, elsewhere)).duplicate);
  // Rows without a delivery id never collide on it.
  CHECK_FALSE(must(journal_inbound(f.db, message(channel, "m-a"))).duplicate);
  CHECK_FALSE(must(journal_inbound(f.db, message(channel, "m-b"))).duplicate);
  // A week later, update ids start again: an old row gives its delivery id up.
  auto later = message(channel, "1001:77");
  later.delivery_id = "update:70";
  later.received_at = must(find_inbound(f.db, a.id)).received_at + delivery_key_lifetime_ms + 1;
  const auto c = must(journal_inbound(f.db, later));
  CHECK_FALSE(c.duplicate);
  CHECK(must(find_inbound(f.db, a.id)).delivery_id.empty());
  CHECK(must(find_inbound(f.db, c.id)).delivery_id == "update:70");
  const auto counts = must(count_inbound_by_status(f.db, channel));
  CHECK(counts.total == 4);
  CHECK(counts.received == 4);
  must(set_inbound_status(f.db, a.id, "done"));
  CHECK(must(count_inbound_by_status(f.db, channel)).done == 1);
}

TEST_CASE("a preview's part 0 takes the final reply: replaced when never sent, an edit owed "
          "when sent, a new message when the edit fails for good",
          "[storage][channels]") {
  fresh_db f;
  const auto agent = f.add_agent();
  const auto channel = must(insert_channel(f.db, webhook_channel(agent)));
  const auto owner = must(ensure_channel_user(f.db, "channel-thread:hooks:t-1"));
  channel_thread_record t;
  t.channel_id = channel;
  t.thread_key = "t-1";
  t.owner_user_id = owner;
  const auto thread = must(bind_channel_thread(f.db, t));
  const auto row = [&](std::string run, std::int64_t part, std::string text, bool preview) {
    outbox_record o;
    o.channel_id = channel;
    o.thread_id = thread.id;
    o.run_uuid = std::move(run);
    o.part = part;
    o.text = std::move(text);
    o.preview = preview;
    o.reply_to = "t-1";
    return o;
  };
  // An ordinary part 0 recorded twice stays as it was (a steered message's reply).
  must(enqueue_outbox(f.db, row("run-0", 0, "first", false)));
  CHECK(must(enqueue_reply_part(f.db, row("run-0", 0, "second", false))) ==
        reply_part_recorded::existed);
  CHECK(must(find_outbox_part(f.db, "run-0", 0)).text == "first");
  CHECK(must(enqueue_reply_part(f.db, row("run-0", 1, "more", false))) ==
        reply_part_recorded::queued);

  // A preview not sent yet goes out with the final text, as an ordinary part.
  const auto early = must(enqueue_outbox(f.db, row("run-1", 0, "Hel", true)));
  CHECK(must(find_outbox(f.db, early)).preview);
  CHECK(must(enqueue_reply_part(f.db, row("run-1", 0, "Hello there", false))) ==
        reply_part_recorded::preview_replaced);
  auto replaced = must(find_outbox(f.db, early));
  CHECK(replaced.text == "Hello there");
  CHECK_FALSE(replaced.preview);
  CHECK(replaced.status == "pending");
  CHECK(replaced.edit_status.empty());
  // Recorded again (a restart recording the same result): left as it is.
  CHECK(must(enqueue_reply_part(f.db, row("run-1", 0, "Hello there", false))) ==
        reply_part_recorded::existed);

  // A preview on the platform owes the final edit, once.
  const auto shown = must(enqueue_outbox(f.db, row("run-2", 0, "Hel", true)));
  must(claim_outbox(f.db, shown));
  must(mark_outbox_sent(f.db, shown, "m-42", "Hello wor"));
  CHECK(must(find_outbox(f.db, shown)).text == "Hello wor");
  auto final_part = row("run-2", 0, "Hello world.", false);
  final_part.edit_next_at = 777;
  CHECK(must(enqueue_reply_part(f.db, final_part)) == reply_part_recorded::edit_owed);
  CHECK(must(enqueue_reply_part(f.db, final_part)) == reply_part_recorded::existed);
  auto owed = must(find_outbox(f.db, shown));
  CHECK(owed.status == "sent");
  CHECK(owed.edit_status == "pending");
  CHECK(owed.edit_text == "Hello world.");
  CHECK(owed.edit_next_at == 777);
  CHECK(owed.platform_message_id == "m-42");
  CHECK(must(list_outbox_edits(f.db)).size() == 1);
  must(mark_outbox_edited(f.db, shown));
  auto edited = must(find_outbox(f.db, shown));
  CHECK(edited.edit_status == "done");
  CHECK(edited.text == "Hello world.");
  CHECK(must(list_outbox_edits(f.db)).empty());

  // The final text recorded while the preview was being sent, and the send carried it:
  // the edit is done with the send.
  const auto racing = must(enqueue_outbox(f.db, row("run-3", 0, "Hi", true)));
  must(claim_outbox(f.db, racing));
  CHECK(must(enqueue_reply_part(f.db, row("run-3", 0, "Hi all", false))) ==
        reply_part_recorded::edit_owed);
  must(mark_outbox_sent(f.db, racing, "m-43", "Hi all"));
  CHECK(must(find_outbox(f.db, racing)).edit_status == "done");

  // An edit that keeps failing is retried, then given up: the final text goes out as a
  // new message (the preview stays as it was on the platform).
  const auto stuck = must(enqueue_outbox(f.db, row("run-4", 0, "Par", true)));
  must(claim_outbox(f.db, stuck));
  must(mark_outbox_sent(f.db, stuck, "m-44", "Partial"));
  must(enqueue_reply_part(f.db, row("run-4", 0, "Partial answer, done.", false)));
  must(record_outbox_edit_failure(f.db, stuck, "429", 5000, 2, false));
  auto retried = must(find_outbox(f.db, stuck));
  CHECK(retried.edit_status == "pending");
  CHECK(retried.edit_attempts == 1);
  CHECK(retried.edit_next_at == 5000);
  CHECK(retried.status == "sent");
  must(record_outbox_edit_failure(f.db, stuck, "503", 0, 2, false));
  auto fallen = must(find_outbox(f.db, stuck));
  CHECK(fallen.edit_status == "dead");
  CHECK(fallen.status == "pending");
  CHECK(fallen.text == "Partial answer, done.");
  CHECK_FALSE(fallen.preview);
  CHECK(fallen.attempts == 0);
  CHECK(fallen.last_error == "503");
  // A refusal (the message cannot be edited) gives up at once.
  const auto refused = must(enqueue_outbox(f.db, row("run-5", 0, "x", true)));
  must(claim_outbox(f.db, refused));
  must(mark_outbox_sent(f.db, refused, "m-45", "x"));
  must(enqueue_reply_part(f.db, row("run-5", 0, "xyz", false)));
  must(record_outbox_edit_failure(f.db, refused, "400 message can't be edited", 0, 6, true));
  CHECK(must(find_outbox(f.db, refused)).status == "pending");
  CHECK(must(find_outbox(f.db, refused)).reply_to == "t-1");
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

TEST_CASE("wecom, wechat_mp and whatsapp channels are stored with their platform keys, and "
          "migration 14 keeps the channels, threads and journal it finds",
          "[storage][channels]") {
  fresh_db f;
  const auto agent = f.add_agent();
  const auto hook = must(insert_channel(f.db, webhook_channel(agent)));
  auto in = message(hook, "m-1");
  must(journal_inbound(f.db, in));
  auto corp = webhook_channel(agent, "corp");
  corp.kind = "wecom";
  corp.callback_url.clear();
  corp.platform.corp_id = "ww123";
  corp.platform.agent_id = "1000002";
  corp.platform.secret_env = "TROUPE_KEY_S";
  corp.platform.aes_key_env = "TROUPE_KEY_A";
  must(insert_channel(f.db, corp));
  auto found = must(find_channel_by_name(f.db, "corp"));
  CHECK(found.kind == "wecom");
  CHECK(found.platform == corp.platform);
  found.platform.agent_id = "1000003";
  must(update_channel(f.db, found));
  CHECK(must(find_channel_by_name(f.db, "corp")).platform.agent_id == "1000003");
  for (const auto* kind : {"wechat_mp", "whatsapp"}) {
    auto other = webhook_channel(agent, kind);
    other.kind = kind;
    CHECK(insert_channel(f.db, other));
  }
  // Running the migration again (an older database) keeps every row and the widened CHECK.
  must(f.db.exec("PRAGMA user_version = 13"));
  CHECK(must(migrate(f.db)) == latest_schema_version());
  CHECK(must(find_channel_by_name(f.db, "corp")).platform.corp_id == "ww123");
  CHECK(must(count_inbound_by_status(f.db, hook)).total == 1);
  auto odd = webhook_channel(agent, "odd");
  odd.kind = "irc";
  CHECK_FALSE(insert_channel(f.db, odd));
}
