// Run journals and their directory: entries encoded once and shared, and the byte cap
// across all journals, which sends the oldest finished journals out of memory first and
// never a running one.

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include "actors/run_fixture.hpp"
#include "troupe/actors/run_journal.hpp"

using namespace troupe;
using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

/// A journal (no writer: its entries live in memory only) in `directory`.
actors::run_journal_actor journal_in(caf::actor_system& system,
                                     const std::shared_ptr<actors::run_directory>& directory,
                                     const std::string& run_id) {
  actors::journal_options o;
  o.run_id = run_id;
  o.conversation_id = "conv-1";
  o.retention = 10min;
  o.directory = directory;
  auto journal = actors::spawn_run_journal(system, std::move(o));
  directory->add(run_id, {journal, 1, "conv-1"});
  return journal;
}

/// Appends one `message` entry with `text_bytes` of text to the journal and waits until
/// the journal has taken it.
void say(caf::actor_system& system, const actors::run_journal_actor& journal,
         std::size_t text_bytes) {
  run_event e;
  e.type = run_event_type::model_delta;
  e.data_json = R"({"text":")" + std::string(text_bytes, 'x') + R"("})";
  caf::scoped_actor self{system};
  self->send(journal, actors::event_atom::value, std::move(e));
  self->request(journal, 10s, actors::get_atom::value)
      .receive(
          [](actors::run_status_view&) {},
          [](caf::error& err) { FAIL("the journal did not answer: " << caf::to_string(err)); });
}

/// Ends the journal's run and waits for its result.
void end_run(caf::actor_system& system, const actors::run_journal_actor& journal) {
  caf::scoped_actor self{system};
  actors::run_result r;
  r.status = storage::run_status::succeeded;
  self->send(journal, actors::done_atom::value, r);
  self->request(journal, 10s, actors::wait_atom::value)
      .receive([](actors::run_result&) {},
               [](caf::error& err) { FAIL("the journal did not end: " << caf::to_string(err)); });
}

} // namespace

TEST_CASE("an entry's SSE frame is encoded once, with its event name and data inside it",
          "[actors][journal]") {
  const auto e = actors::make_journal_entry(7, "message", R"({"text":"hi"})");
  REQUIRE(e.bytes);
  CHECK(e.bytes->sse == "event: message\nid: 7\ndata: {\"text\":\"hi\"}\n\n");
  CHECK(e.event() == "message");
  CHECK(e.data() == R"({"text":"hi"})");
  // The views point into the frame: nothing is held twice.
  CHECK(e.data().data() >= e.bytes->sse.data());
  CHECK(e.data().data() < e.bytes->sse.data() + e.bytes->sse.size());
  CHECK(e.bytes->spilled_data.empty());
  // A copy of the entry shares its bytes; its frame shares them too.
  const auto copy = e;
  CHECK(copy.bytes.get() == e.bytes.get());
  CHECK(copy.frame().get() == &e.bytes->sse);
  const auto done = actors::make_journal_entry(9, "", "[DONE]", true);
  CHECK(done.bytes->sse == "id: 9\ndata: [DONE]\n\n");
  CHECK(done.event().empty());
  CHECK(done.data() == "[DONE]");
  // Data over several lines stays whole (the frame splits it into data lines).
  const auto lines = actors::make_journal_entry(3, "error", "a\nb");
  CHECK(lines.bytes->sse == "event: error\nid: 3\ndata: a\ndata: b\n\n");
  CHECK(lines.data() == "a\nb");
}

TEST_CASE("past the byte cap the oldest finished journals leave memory first, never a running one",
          "[actors][journal]") {
  run_world world("[]");
  auto& system = world.system();
  auto directory = std::make_shared<actors::run_directory>(std::size_t{25'000});
  // Two finished journals of about 10 kB each: under the cap together.
  auto first = journal_in(system, directory, "run-first");
  say(system, first, 10'000);
  end_run(system, first);
  auto second = journal_in(system, directory, "run-second");
  say(system, second, 10'000);
  end_run(system, second);
  CHECK(directory->bytes() > 20'000);
  CHECK(directory->bytes() < 25'000);
  CHECK(directory->find("run-first"));
  CHECK(directory->find("run-second"));

  // A running journal grows past the cap: the oldest finished one goes, and that is enough.
  auto running = journal_in(system, directory, "run-running");
  say(system, running, 5'000);
  CHECK_FALSE(directory->find("run-first"));
  CHECK(directory->find("run-second"));
  CHECK(wait_for_exit(system, first, 5s));
  CHECK(directory->bytes() <= 25'000);

  // It grows on: the other finished one goes; the running one stays, over the cap alone.
  say(system, running, 30'000);
  CHECK_FALSE(directory->find("run-second"));
  CHECK(wait_for_exit(system, second, 5s));
  CHECK(directory->find("run-running"));
  CHECK(directory->bytes() > 25'000);
  // Its entries are all there for a follower.
  caf::scoped_actor self{system};
  self->request(running, 10s, actors::get_atom::value)
      .receive([](actors::run_status_view& v) { CHECK(v.last_seq == 2); },
               [](caf::error& err) { FAIL(caf::to_string(err)); });

  // Once it has finished, it is the oldest finished journal, over the cap: it goes too,
  // and the directory's count is back to nothing. (It may leave as soon as it has its
  // result, so no request waits for that result here: it could find the journal gone.)
  actors::run_result r;
  r.status = storage::run_status::succeeded;
  caf::anon_send(running, actors::done_atom::value, r);
  CHECK(wait_for_exit(system, running, 5s));
  CHECK_FALSE(directory->find("run-running"));
  CHECK(directory->size() == 0);
  CHECK(directory->bytes() == 0);
}
