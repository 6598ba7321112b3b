// The chat service: conversations built from SQLite, messages handed over without loss
// even when the conversation passivates at that moment, history reloaded after
// passivation, run artifacts stored as files, and cancellation by run id.

#include <future>
#include <mutex>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "actors/run_fixture.hpp"
#include "support/wait_until.hpp"
#include "troupe/actors/bridge.hpp"
#include "troupe/actors/chat_service.hpp"
#include "troupe/storage/repositories.hpp"
#include "troupe/tools/blocking_pool.hpp"

using namespace troupe;
using namespace troupe::test;
using namespace std::chrono_literals;
using storage::testing::must;

namespace {

/// A database with a provider (the mock), an agent, a user and a conversation, and a
/// chat service over it.
struct chat_world {
  explicit chat_world(std::string_view script, std::chrono::milliseconds idle_ttl = 10min,
                      std::chrono::milliseconds retention = 50ms, std::size_t max_retained = 100,
                      actors::store_writer_options writer_options = {}, bool writer_has_db = true,
                      std::shared_ptr<tools::blocking_pool> blocking = nullptr)
      : world(script) {
    storage::provider_record p;
    p.name = "mock";
    p.kind = "openai-compatible";
    p.base_url = world.mock.base_url();
    p.api_key = "test";
    const auto provider = must(storage::insert_provider(db.db, p));
    storage::agent_record a;
    a.uuid = "agent-1";
    a.name = "tester";
    a.provider_id = provider;
    a.main_model = "m1";
    a.tools_json = R"(["write","read","ls"])";
    a.limits_json = R"({"max_rounds":10,"timeout_s":30})";
    agent = must(storage::insert_agent(db.db, a));
    user = db.add_user("ann");
    conversation.uuid = "conv-1";
    conversation.owner_user_id = user;
    conversation.agent_id = agent;
    conversation.id = must(storage::insert_conversation(db.db, conversation));
    reads = must(storage::read_pool::open(db.dir.db(), 2));
    writer = actors::spawn_store_writer(
        world.system(),
        writer_has_db ? std::make_shared<storage::connection>(
                            must(storage::open_writer(db.dir.db(), storage::sync_mode::normal)))
                      : nullptr,
        writer_options);
    actors::chat_service_options o;
    o.writer = writer;
    o.reads = reads;
    o.io.http = world.http();
    o.io.tools = world.tools;
    o.io.blocking = std::move(blocking);
    o.data_dir = db.dir.path();
    o.idle_ttl = idle_ttl;
    o.retention = retention;
    o.max_retained_runs = max_retained;
    chat = std::make_unique<actors::chat_service>(world.system(), std::move(o));
  }
  ~chat_world() {
    chat->stop();
    caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
  }

  /// Submits `text` and waits for its run's result.
  actors::run_result say(const std::string& text) {
    return wait(submit(text).journal);
  }

  actors::submitted_run submit(const std::string& text) {
    actors::chat_submission s;
    s.user_id = user;
    s.conversation = conversation;
    s.text = text;
    boost::asio::io_context io;
    auto submitted = run_until_done(io, chat->submit(std::move(s)));
    REQUIRE(submitted);
    return *submitted;
  }

  actors::run_result wait(const actors::run_journal_actor& journal) {
    caf::scoped_actor self{world.system()};
    actors::run_result out;
    self->request(journal, std::chrono::seconds(30), actors::wait_atom::value)
        .receive([&](actors::run_result& r) { out = std::move(r); },
                 [&](caf::error& e) { FAIL("no result: " << caf::to_string(e)); });
    return out;
  }

  run_world world;
  storage::testing::fresh_db db;
  storage::row_id agent = 0;
  storage::row_id user = 0;
  storage::conversation_record conversation;
  std::shared_ptr<storage::read_pool> reads;
  actors::store_writer_actor writer;
  std::unique_ptr<actors::chat_service> chat;
};

/// Holds the pool's only thread until `released` is ready; `started` once it does.
boost::asio::awaitable<void> occupy(std::shared_ptr<tools::blocking_pool> pool,
                                    std::shared_future<void> released,
                                    std::shared_ptr<std::atomic<bool>> started) {
  auto job = [released, started](const tools::job_control&) {
    *started = true;
    released.wait();
    return 0;
  };
  auto running = pool->run(std::move(job), std::chrono::seconds(60));
  // The outcome is the test's to check (the file stored after the release), not this
  // thread's: Catch's assertions are not thread-safe.
  auto ran = co_await std::move(running);
  (void)ran;
}

} // namespace

TEST_CASE("no message is lost when its conversation passivates at the hand-over",
          "[actors][chat_service]") {
  // Conversations leave memory 1 ms after their last run: most messages find the
  // previous actor gone or going.
  chat_world w("[]", 1ms);
  for (int i = 0; i < 60; ++i) {
    auto r = w.say("message " + std::to_string(i));
    REQUIRE(r.status == storage::run_status::succeeded);
    CHECK_THAT(r.text, Catch::Contains("message " + std::to_string(i)));
    if (i % 3 == 0) {
      // Spreads the next message's arrival around the 1 ms passivation: the subject.
      std::this_thread::sleep_for(std::chrono::microseconds(500 + 300 * (i % 5))); // subject
    }
  }
  auto messages = must(storage::list_messages(w.db.db, w.conversation.id));
  std::size_t users = 0;
  for (const auto& m : messages) {
    users += m.role == "user" ? 1u : 0u;
  }
  CHECK(users == 60);
}

TEST_CASE("a conversation brought back after passivation has its history",
          "[actors][chat_service]") {
  chat_world w(R"([{"match":{"user":"what was the word","prompt":"PAPAYA"},
                     "reply":{"text":"The word was PAPAYA."}}])",
               20ms);
  const auto first = w.submit("remember the word PAPAYA");
  REQUIRE(w.wait(first.journal).status == storage::run_status::succeeded);
  // Passivation happened: the actor that held the conversation ended on its own (an empty
  // exit reason, not a kill or a failure) once idle for 20 ms, with nothing in memory left.
  const auto reason = wait_for_exit(w.world.system(), first.conversation, 10s);
  REQUIRE(reason.has_value());
  CHECK_FALSE(*reason);
  const auto before = w.world.mock.stats().completion_requests;
  const auto second = w.submit("what was the word?");
  // A new actor took the message, built from SQLite alone.
  CHECK(second.conversation != first.conversation);
  auto r = w.wait(second.journal);
  REQUIRE(r.status == storage::run_status::succeeded);
  CHECK(w.world.mock.stats().completion_requests == before + 1);
  // The earlier exchange, loaded from SQLite, was in the new actor's prompt.
  CHECK(r.text == "The word was PAPAYA.");
}

TEST_CASE("a run's files become stored files with ids", "[actors][chat_service]") {
  chat_world w(R"([
    {"match":{"has_tool_result":false},"reply":{"tool_calls":[{"name":"write",
      "arguments":{"path":"notes.md","content":"# notes\n"}}]}},
    {"match":{"has_tool_result":true},"reply":{"text":"Wrote notes.md."}}])");
  auto r = w.say("write notes");
  REQUIRE(r.status == storage::run_status::succeeded);
  REQUIRE(r.artifacts.size() == 1);
  REQUIRE_FALSE(r.artifacts.front().file_id.empty());
  auto f = must(storage::find_file(w.db.db, r.artifacts.front().file_id, w.user));
  CHECK(f.name == "notes.md");
  CHECK(f.kind == "artifact");
  CHECK(f.size_bytes == 8);
  CHECK(f.run_id.has_value());
  CHECK(std::filesystem::file_size(w.db.dir.path() / f.storage_path) == 8);
}

TEST_CASE("a run's files are copied on the blocking pool, not on the conversation's thread",
          "[actors][chat_service]") {
  auto pool = std::make_shared<tools::blocking_pool>(1);
  chat_world w(R"([
    {"match":{"has_tool_result":false},"reply":{"tool_calls":[{"name":"write",
      "arguments":{"path":"notes.md","content":"# notes\n"}}]}},
    {"match":{"has_tool_result":true},"reply":{"text":"Wrote notes.md."}}])",
               10min, 50ms, 100, {}, true, pool);
  // The conversation is live first: loading it reads on the pool too.
  REQUIRE(w.say("write notes").status == storage::run_status::succeeded);
  // The pool's only thread is held, so a copy handed to the pool waits in its queue.
  std::promise<void> release;
  auto started = std::make_shared<std::atomic<bool>>(false);
  boost::asio::io_context io;
  boost::asio::co_spawn(io, occupy(pool, release.get_future().share(), started),
                        boost::asio::detached);
  std::thread io_thread([&io] { io.run(); });
  REQUIRE(wait_until([&] { return started->load(); }, 10s));

  const auto submitted = w.submit("write notes");
  // The run ends; storing its file is queued on the pool (nothing else uses it here).
  const bool queued = wait_until([&] { return pool->queued() == 1; }, 20s);
  release.set_value();
  io_thread.join();
  REQUIRE(queued);
  auto r = w.wait(submitted.journal);
  REQUIRE(r.status == storage::run_status::succeeded);
  REQUIRE(r.artifacts.size() == 1);
  REQUIRE_FALSE(r.artifacts.front().file_id.empty());
  auto f = must(storage::find_file(w.db.db, r.artifacts.front().file_id, w.user));
  CHECK(std::filesystem::file_size(w.db.dir.path() / f.storage_path) == 8);
}

TEST_CASE("a queued run is cancelled by its id before it starts", "[actors][chat_service]") {
  chat_world w(R"([{"match":{"user":"slow"},"reply":{"text":"a b c d e f g h"},
                   "token_delay_ms":100}])");
  actors::chat_submission first;
  first.user_id = w.user;
  first.conversation = w.conversation;
  first.text = "slow";
  auto second = first;
  second.text = "queued";
  boost::asio::io_context io;
  auto a = run_until_done(io, w.chat->submit(std::move(first)));
  auto b = run_until_done(io, w.chat->submit(std::move(second)));
  REQUIRE(a);
  REQUIRE(b);
  auto cancelled = run_until_done(io, w.chat->cancel(w.conversation.uuid, b->run_id));
  REQUIRE(cancelled);
  CHECK(*cancelled);
  auto rb = w.wait(b->journal);
  CHECK(rb.status == storage::run_status::cancelled);
  auto ra = w.wait(a->journal);
  CHECK(ra.status == storage::run_status::succeeded);
  // Unknown runs are not there to cancel.
  auto unknown = run_until_done(io, w.chat->cancel(w.conversation.uuid, "nope"));
  REQUIRE(unknown);
  CHECK_FALSE(*unknown);
}

TEST_CASE("finished runs are kept for replay up to a bound, oldest leaving first",
          "[actors][chat_service]") {
  // A long retention, but room for three finished journals only.
  chat_world w("[]", 10min, 10min, 3);
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    auto run = w.submit("message " + std::to_string(i));
    REQUIRE(w.wait(run.journal).status == storage::run_status::succeeded);
    ids.push_back(run.run_id);
  }
  // The directory drops the oldest journals as newer ones finish; the last may trail.
  CHECK(wait_until([&] { return !w.chat->find_run(ids[1]); }, 5s));
  CHECK_FALSE(w.chat->find_run(ids[0]));
  CHECK_FALSE(w.chat->find_run(ids[1]));
  for (int i = 2; i < 5; ++i) {
    CHECK(w.chat->find_run(ids[i]));
  }
}

TEST_CASE("a submitted message and its run row are committed before the submission is "
          "answered",
          "[actors][chat_service][durable]") {
  // Writes wait 300 ms for company: an answer given before the commit would come first.
  actors::store_writer_options slow_commit;
  slow_commit.group_commit = 300ms;
  chat_world w(R"([{"match":{"user":"hold"},"ttft_ms":3600000,"reply":{"text":"late"}}])", 10min,
               50ms, 100, slow_commit);
  auto run = w.submit("hold this");
  // Read at once, on the test's own connection: both rows are there.
  auto row = storage::find_run_by_uuid(w.db.db, run.run_id);
  REQUIRE(row);
  auto messages = must(storage::list_messages(w.db.db, w.conversation.id));
  REQUIRE(messages.size() == 1);
  CHECK(messages.front().role == "user");
  CHECK(messages.front().content == "hold this");
  CHECK(messages.front().run_id == std::optional<storage::row_id>(row->id));
  boost::asio::io_context io;
  auto cancelled = run_until_done(io, w.chat->cancel(w.conversation.uuid, run.run_id));
  REQUIRE(cancelled);
  CHECK(w.wait(run.journal).status == storage::run_status::cancelled);
  // The user message is stored once: the run did not write it again.
  CHECK(must(storage::list_messages(w.db.db, w.conversation.id)).size() == 1);
}

TEST_CASE("a conversation created for its first message is stored in the same commit as that "
          "message, its history and its run",
          "[actors][chat_service][durable]") {
  chat_world w(R"([{"match":{"user":"hold"},"ttft_ms":3600000,"reply":{"text":"late"}}])");
  storage::agent_record agent = must(storage::find_agent_by_uuid(w.db.db, "agent-1"));
  actors::chat_submission s;
  s.user_id = w.user;
  s.conversation.uuid = "conv-new";
  s.conversation.owner_user_id = w.user;
  s.conversation.agent_id = w.agent;
  s.conversation.title = "new one";
  s.text = "hold on";
  s.fresh = actors::chat_submission::fresh_conversation{
      agent,
      {chat_message{chat_role::user, "earlier", {}, {}, {}},
       chat_message{chat_role::assistant, "an earlier answer", {}, {}, {}}}};
  const auto before = must(actors::writer_stats(w.world.system(), w.writer));
  boost::asio::io_context io;
  auto submitted = run_until_done(io, w.chat->submit(std::move(s)));
  REQUIRE(submitted);
  // Acknowledged after one write: the conversation row was not a commit of its own, nor
  // was the run's start.
  const auto after = must(actors::writer_stats(w.world.system(), w.writer));
  CHECK(after.writes - before.writes == 1);
  CHECK(after.batches - before.batches == 1);
  auto conversation = must(storage::find_conversation_by_uuid(w.db.db, "conv-new", w.user));
  CHECK(conversation.title == "new one");
  auto run = must(storage::find_run_by_uuid(w.db.db, submitted->run_id));
  CHECK(run.conversation_id == conversation.id);
  // The run started as its message was accepted: the same commit says so.
  CHECK(run.status == storage::run_status::running);
  CHECK(run.started_at.has_value());
  auto messages = must(storage::list_messages(w.db.db, conversation.id));
  REQUIRE(messages.size() == 3);
  CHECK(messages[0].content == "earlier");
  CHECK(messages[1].content == "an earlier answer");
  CHECK(messages[2].content == "hold on");
  CHECK(messages[2].run_id == std::optional<storage::row_id>(run.id));
  auto cancelled = run_until_done(io, w.chat->cancel("conv-new", submitted->run_id));
  REQUIRE(cancelled);
  CHECK(w.wait(submitted->journal).status == storage::run_status::cancelled);
}

TEST_CASE("a run's model call does not wait for its message's commit, but its answer does",
          "[actors][chat_service][durable]") {
  chat_world w(R"([{"match":{"user":"quick"},"reply":{"text":"fast answer"}}])");
  // The test's own connection holds the database's write lock: the writer's commit waits
  // (up to its 5 s busy timeout) until the test lets go.
  must(w.db.db.exec("BEGIN IMMEDIATE"));
  actors::chat_submission s;
  s.user_id = w.user;
  s.conversation = w.conversation;
  s.text = "quick";
  auto submitting = std::async(std::launch::async, [&w, s = std::move(s)]() mutable {
    boost::asio::io_context io;
    return run_until_done(io, w.chat->submit(std::move(s)));
  });
  CHECK(wait_until([&] { return w.world.mock.stats().completion_requests == 1; }, 4s));
  // The model was asked; the message is not durable, so it is not acknowledged yet.
  CHECK(submitting.wait_for(0s) == std::future_status::timeout);
  must(w.db.db.exec("COMMIT"));
  auto submitted = submitting.get();
  REQUIRE(submitted);
  auto r = w.wait(submitted->journal);
  CHECK(r.status == storage::run_status::succeeded);
  CHECK(r.text == "fast answer");
  // Everything the run wrote while its row was pending went after the row, in order.
  auto row = must(storage::find_run_by_uuid(w.db.db, submitted->run_id));
  CHECK(row.status == storage::run_status::succeeded);
  auto messages = must(storage::list_messages(w.db.db, w.conversation.id));
  REQUIRE(messages.size() == 2);
  CHECK(messages[0].role == "user");
  CHECK(messages[1].role == "assistant");
  CHECK(messages[1].run_id == std::optional<storage::row_id>(row.id));
  CHECK_FALSE(must(storage::list_steps(w.db.db, row.id)).empty());
}

TEST_CASE("a run submitted to be waited for is answered even when it ended first and its "
          "journal keeps nothing",
          "[actors][chat_service]") {
  // Retention 0: a finished journal leaves as soon as its entries are durable.
  chat_world w(R"([{"match":{"user":"quick"},"reply":{"text":"done already"}}])", 10min, 0ms);
  const auto submit = [&](bool awaited) {
    actors::chat_submission s;
    s.user_id = w.user;
    s.conversation = w.conversation;
    s.text = "quick";
    s.awaited = awaited;
    boost::asio::io_context io;
    auto submitted = run_until_done(io, w.chat->submit(std::move(s)));
    REQUIRE(submitted);
    return *submitted;
  };
  const auto finished = [&](const std::string& run_id) {
    auto row = storage::find_run_by_uuid(w.db.db, run_id);
    return row && row->status == storage::run_status::succeeded;
  };
  // Not waited for: the journal leaves once the run is over.
  auto unwaited = submit(false);
  CHECK(wait_until([&] { return finished(unwaited.run_id); }, 10s));
  CHECK(wait_until([&] { return !w.chat->find_run(unwaited.run_id); }, 10s));
  // Waited for, the wait arriving only after the run ended and its rows are durable: the
  // journal stayed for it, answers, and leaves then.
  auto waited = submit(true);
  CHECK(wait_until([&] { return finished(waited.run_id); }, 10s));
  auto r = w.wait(waited.journal);
  CHECK(r.status == storage::run_status::succeeded);
  CHECK(r.text == "done already");
  CHECK(wait_until([&] { return !w.chat->find_run(waited.run_id); }, 10s));
}

TEST_CASE("a message that cannot be stored is refused, never acknowledged",
          "[actors][chat_service][durable]") {
  // A writer without a database fails every write.
  chat_world w("[]", 10min, 50ms, 100, {}, false);
  actors::chat_submission s;
  s.user_id = w.user;
  s.conversation = w.conversation;
  s.text = "lost?";
  boost::asio::io_context io;
  auto submitted = run_until_done(io, w.chat->submit(std::move(s)));
  REQUIRE_FALSE(submitted);
  CHECK_THAT(submitted.error().message, Catch::Contains("not stored"));
  // Its run may have asked the model while the write was in flight, but no answer of
  // a message that is not stored is given: the journal was ended with the refusal.
}

TEST_CASE("a run whose step cannot be stored fails and says why",
          "[actors][chat_service][durable]") {
  chat_world w("[]");
  // SQLite refuses every step from now on (a full disk would look the same to the run).
  must(w.db.db.exec("CREATE TRIGGER refuse_steps BEFORE INSERT ON execution_steps "
                    "BEGIN SELECT RAISE(ABORT, 'steps refused by the test'); END"));
  auto r = w.say("hello");
  CHECK(r.status == storage::run_status::failed);
  CHECK_THAT(r.error,
             Catch::Contains("could not store") && Catch::Contains("steps refused by the test"));
}

TEST_CASE("runs accepted before a stop and not started are resumed once, their message "
          "stored once",
          "[actors][chat_service][durable]") {
  chat_world w(R"([{"match":{"user":"pending question"},"reply":{"text":"resumed answer"}}])");
  // What a stop leaves of an accepted turn: a queued run row and its user message.
  storage::run_record row;
  row.uuid = "run-left-queued";
  row.conversation_id = w.conversation.id;
  row.agent_id = w.agent;
  row.model = "m1";
  const auto run = must(storage::insert_run(w.db.db, row));
  storage::message_record m;
  m.conversation_id = w.conversation.id;
  m.run_id = run;
  m.role = "user";
  m.content = "pending question";
  must(storage::insert_message(w.db.db, m));

  boost::asio::io_context io;
  CHECK(run_until_done(io, w.chat->resume_queued_runs()) == 1);
  auto entry = w.chat->find_run("run-left-queued");
  REQUIRE(entry);
  auto r = w.wait(entry->journal);
  CHECK(r.status == storage::run_status::succeeded);
  CHECK(r.text == "resumed answer");
  CHECK(must(storage::find_run(w.db.db, run)).status == storage::run_status::succeeded);
  // One user message (not stored again) and one answer.
  auto messages = must(storage::list_messages(w.db.db, w.conversation.id));
  REQUIRE(messages.size() == 2);
  CHECK(messages[1].content == "resumed answer");
  CHECK(w.world.mock.stats().completion_requests == 1);
  // Nothing is queued any more: a second recovery resumes nothing.
  CHECK(run_until_done(io, w.chat->resume_queued_runs()) == 0);
}

namespace {

/// What a follower of a journal received.
struct followed_entries {
  std::mutex mutex;
  std::vector<actors::journal_entry> entries;
  std::promise<void> ended;
};

actors::journal_sink_actor::behavior_type entry_collector(std::shared_ptr<followed_entries> into) {
  return {[into](actors::entry_atom, const actors::journal_entry& e) {
    std::lock_guard lock(into->mutex);
    into->entries.push_back(e);
    if (e.last) {
      into->ended.set_value();
    }
  }};
}

/// The run's stored entries, once they end with `[DONE]` (the final group is stored after
/// the answer), or what is there at the deadline.
std::vector<storage::run_event_record> stored_events(chat_world& w, const std::string& run_id) {
  std::vector<storage::run_event_record> events;
  wait_until(
      [&] {
        auto row = storage::find_run_by_uuid(w.db.db, run_id);
        if (!row) {
          return false;
        }
        events = must(storage::list_run_events(w.db.db, row->id));
        return !events.empty() && events.back().data == "[DONE]";
      },
      10s);
  return events;
}

} // namespace

TEST_CASE("every journal entry of a run is stored under the id it had live",
          "[actors][chat_service][journal]") {
  chat_world w(R"([{"match":{"call":1},"reply":{"tool_calls":[{"name":"ls","arguments":{}}]}},
                  {"match":{"call":2},"reply":{"text":"one two three"}}])");
  auto run = w.submit("list the files");
  auto into = std::make_shared<followed_entries>();
  auto ended = into->ended.get_future();
  auto sink = w.world.system().spawn(entry_collector, into);
  caf::anon_send(run.journal, actors::follow_atom::value, actors::journal_sink_actor{sink},
                 std::uint64_t{0});
  CHECK(w.wait(run.journal).status == storage::run_status::succeeded);
  REQUIRE(ended.wait_for(10s) == std::future_status::ready);
  const auto stored = stored_events(w, run.run_id);
  std::lock_guard lock(into->mutex);
  const auto& live = into->entries;
  REQUIRE(live.size() > 4);
  REQUIRE(stored.size() == live.size());
  for (std::size_t i = 0; i < live.size(); ++i) {
    INFO("entry " << i);
    CHECK(stored[i].seq == static_cast<std::int64_t>(live[i].seq));
    CHECK(stored[i].event == live[i].event());
    CHECK(stored[i].data == live[i].data());
  }
  CHECK(stored.back().data == "[DONE]");
  CHECK(stored[stored.size() - 2].event == "done");
  // Rebuilt from storage, the journal is the same, its done entry marked as replayed.
  auto replay = w.chat->stored_entries(run.run_id, 2);
  REQUIRE(replay);
  REQUIRE(replay->size() == live.size() - 2);
  CHECK(replay->front().seq == 3);
  CHECK(replay->back().last);
  CHECK_THAT(std::string(replay->at(replay->size() - 2).data()),
             Catch::Contains(R"("replayed_from":"database")"));
}

TEST_CASE("a finished journal leaves memory only once its entries are durable",
          "[actors][chat_service][journal]") {
  // No retention at all, and every commit waits 300 ms for company.
  actors::store_writer_options slow_commit;
  slow_commit.group_commit = 300ms;
  chat_world w("[]", 10min, 0ms, 100, slow_commit);
  auto run = w.submit("hello");
  CHECK(w.wait(run.journal).status == storage::run_status::succeeded);
  // The answer did not wait for the events' commit, and the journal waits for it.
  CHECK(w.chat->find_run(run.run_id));
  REQUIRE(wait_until([&] { return !w.chat->find_run(run.run_id); }, 10s));
  // Gone from memory: everything is in storage, to the end.
  auto replay = w.chat->stored_entries(run.run_id, 0);
  REQUIRE(replay);
  REQUIRE(replay->size() > 2);
  CHECK(replay->back().data() == "[DONE]");
  CHECK(replay->at(replay->size() - 2).event() == "done");
  for (std::size_t i = 0; i < replay->size(); ++i) {
    CHECK(replay->at(i).seq == i + 1);
  }
}
