#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include "storage/storage_fixture.hpp"
#include "support/wait_until.hpp"
#include "troupe/actors/memory_service.hpp"
#include "troupe/actors/memory_tools.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/storage/database.hpp"
#include "troupe/storage/memory.hpp"

using namespace troupe;
using namespace troupe::actors;
using namespace troupe::storage;
using namespace troupe::storage::testing;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

// A migrated database with two users, an actor system, a store writer, a read pool and
// the memory service, and an io_context on two threads for the coroutines.
struct memory_fixture {
  explicit memory_fixture(memory_service_options options = {}) {
    auto conn = must(open_writer(dir.db(), sync_mode::normal));
    for (const char* name : {"ann", "bob"}) {
      user_record u;
      u.name = name;
      users.push_back(must(insert_user(conn, u)));
    }
    agent_record a;
    a.uuid = "agent";
    a.name = "agent";
    a.main_model = "m";
    agent = must(insert_agent(conn, a));
    conversation_record c;
    c.uuid = "conv";
    c.owner_user_id = users[0];
    c.agent_id = agent;
    conversation = must(insert_conversation(conn, c));
    writer = spawn_store_writer(system, std::make_shared<connection>(std::move(conn)), {});
    reads = must(read_pool::open(dir.db(), 2));
    memory = std::make_shared<memory_service>(system, writer, reads, pool, options);
    for (int i = 0; i < 2; ++i) {
      threads.emplace_back([this] { io.run(); });
    }
  }
  ~memory_fixture() {
    memory->stop();
    work.reset();
    for (auto& t : threads) {
      t.join();
    }
    // The blocking pool goes (its threads joined) before the io_context its jobs post
    // their results to: a pool thread may still be waking the context (TSan saw it).
    memory.reset();
    pool.reset();
    caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
  }

  /// Runs `task` on the io_context and waits for its value.
  template <class T> T run(asio::awaitable<T> task) {
    auto f = asio::co_spawn(io, std::move(task), asio::use_future);
    REQUIRE(f.wait_for(60s) == std::future_status::ready);
    return f.get();
  }

  template <class T> T read(std::function<expected<T>(connection&)> job) {
    return must(reads->with([&](connection& c) { return job(c); }));
  }

  temp_dir dir;
  std::vector<row_id> users;
  row_id agent = 0;
  row_id conversation = 0;
  caf::actor_system_config config;
  caf::actor_system system{config};
  store_writer_actor writer;
  std::shared_ptr<read_pool> reads;
  std::shared_ptr<tools::blocking_pool> pool = std::make_shared<tools::blocking_pool>(2);
  std::shared_ptr<memory_service> memory;
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::vector<std::thread> threads;
};

memory_change propose_change(row_id user, std::string key, std::string content, bool active,
                             std::optional<row_id> conversation = std::nullopt) {
  memory_change c;
  c.proposal.uuid = new_uuid();
  c.proposal.user_id = user;
  c.proposal.kind = "fact";
  c.proposal.key = std::move(key);
  c.proposal.content = std::move(content);
  c.proposal.active = active;
  c.proposal.actor = "test";
  c.proposal.conversation_id = conversation;
  return c;
}

asio::awaitable<expected<memory_write_result>> write_one(std::shared_ptr<memory_service> m,
                                                         row_id user, memory_change change) {
  auto writing = m->write(user, std::move(change));
  co_return co_await std::move(writing);
}

asio::awaitable<expected<void>> settle_one(std::shared_ptr<memory_service> m, row_id user,
                                           row_id conversation) {
  auto settling = m->settle(user, conversation);
  co_return co_await std::move(settling);
}

std::vector<memory_item_record> all_items(memory_fixture& f, row_id user) {
  return f.read<std::vector<memory_item_record>>([user](connection& c) {
    memory_filter filter;
    filter.user_id = user;
    page p;
    p.limit = 100000;
    return list_memories(c, filter, p);
  });
}

} // namespace

TEST_CASE("1,000 concurrent proposals for overlapping keys end consistent, every superseded item "
          "with a successor",
          "[actors][memory]") {
  memory_fixture f;
  constexpr int proposals = 1000;
  constexpr int keys = 10;
  std::vector<std::future<expected<memory_write_result>>> pending;
  pending.reserve(proposals);
  for (int i = 0; i < proposals; ++i) {
    // Both users, overlapping keys, every value distinct; half trusted (active).
    const auto user = f.users[static_cast<std::size_t>((i / keys) % 2)];
    auto change = propose_change(user, "key" + std::to_string(i % keys),
                                 "value number " + std::to_string(i) + " of this key", i % 4 < 2);
    pending.push_back(
        asio::co_spawn(f.io, write_one(f.memory, user, std::move(change)), asio::use_future));
  }
  std::size_t failed = 0;
  for (auto& p : pending) {
    REQUIRE(p.wait_for(120s) == std::future_status::ready);
    auto r = p.get();
    if (!r || r->refusal) {
      ++failed;
    }
  }
  CHECK(failed == 0);
  for (const auto user : f.users) {
    const auto items = all_items(f, user);
    std::map<row_id, memory_item_record> by_id;
    for (const auto& m : items) {
      by_id.emplace(m.id, m);
    }
    // Every value written is an item: nothing lost, nothing merged away.
    CHECK(items.size() == proposals / 2);
    std::map<std::string, int> active_per_key;
    std::map<std::string, int> candidates_per_key;
    for (const auto& m : items) {
      if (m.status == "active") {
        ++active_per_key[m.memory_key];
      } else if (m.status == "candidate") {
        ++candidates_per_key[m.memory_key];
      } else {
        // Superseded: its successor exists, has the same key and is newer.
        REQUIRE(m.status == "superseded");
        REQUIRE(m.superseded_by);
        auto next = by_id.find(*m.superseded_by);
        REQUIRE(next != by_id.end());
        CHECK(next->second.memory_key == m.memory_key);
        CHECK(next->second.id > m.id);
        const auto revisions = f.read<std::vector<memory_revision_record>>(
            [id = m.id](connection& c) { return list_memory_revisions(c, id); });
        REQUIRE(revisions.size() >= 2);
        CHECK(revisions.front().action == "created");
        CHECK(revisions.back().status == "superseded");
      }
    }
    for (int k = 0; k < keys; ++k) {
      const auto key = "key" + std::to_string(k);
      INFO(key);
      CHECK(active_per_key[key] <= 1);
      CHECK(candidates_per_key[key] <= 1);
      CHECK(active_per_key[key] + candidates_per_key[key] >= 1);
    }
  }
}

TEST_CASE("settling a conversation waits for the memory writes it queued", "[actors][memory]") {
  memory_fixture f;
  const auto user = f.users[0];
  auto writer = f.memory->writer(user);
  caf::scoped_actor self{f.system};
  // One sender: the writer takes the 50 changes before the settle request.
  for (int i = 0; i < 50; ++i) {
    self->send(writer, write_atom::value,
               propose_change(user, "k" + std::to_string(i), "fact " + std::to_string(i) + " x",
                              false, f.conversation));
  }
  bool settled = false;
  self->request(writer, 60s, settle_atom::value, f.conversation)
      .receive([&](bool ok) { settled = ok; },
               [&](caf::error& e) { FAIL("settle failed: " << caf::to_string(e)); });
  CHECK(settled);
  // Every write is durable by the time the settle is answered.
  CHECK(all_items(f, user).size() == 50);
}

TEST_CASE("a memory writer passivates when idle and a later write gets a new one",
          "[actors][memory]") {
  memory_service_options options;
  options.idle_ttl = 20ms;
  memory_fixture f(options);
  const auto user = f.users[1];
  auto first = f.run(write_one(f.memory, user, propose_change(user, "a", "first fact", true)));
  REQUIRE(first);
  REQUIRE(troupe::test::wait_until([&] { return f.memory->live_writers() == 0; }, 10s));
  auto second = f.run(write_one(f.memory, user, propose_change(user, "a", "second fact", true)));
  REQUIRE(second);
  CHECK(second->outcome == memory_outcome::superseded);
  // Nothing pending: settle answers at once.
  CHECK(f.run(settle_one(f.memory, user, 0)));
}

TEST_CASE("recall renders only the user's active items of this agent into the block",
          "[actors][memory]") {
  memory_fixture f;
  const auto ann = f.users[0];
  const auto bob = f.users[1];
  REQUIRE(f.run(write_one(f.memory, ann, propose_change(ann, "editor", "editor: vim", true))));
  REQUIRE(f.run(write_one(f.memory, bob, propose_change(bob, "editor", "editor: emacs", true))));
  REQUIRE(f.run(write_one(f.memory, ann, propose_change(ann, "editor2", "editor: nano", false))));
  memory_recall_request request;
  request.user = ann;
  request.agent = f.agent;
  request.objective = "which editor?";
  auto block = f.run(f.memory->recall(request));
  REQUIRE(block);
  CHECK_THAT(block->text, Catch::Contains("- [fact / editor] editor: vim"));
  CHECK_THAT(block->text, !Catch::Contains("emacs") && !Catch::Contains("nano"));
  CHECK(block->ids.size() == 1);
}

TEST_CASE("a user without active memories is recalled from the database once, then at no cost "
          "until a write of theirs",
          "[actors][memory]") {
  memory_fixture f;
  const auto ann = f.users[0];
  const auto bob = f.users[1];
  memory_recall_request request;
  request.user = ann;
  request.agent = f.agent;
  request.objective = "which editor do I use?";
  auto recall = [&](row_id user) {
    auto r = request;
    r.user = user;
    auto block = f.run(f.memory->recall(r));
    REQUIRE(block);
    return *block;
  };
  CHECK_FALSE(f.memory->known_without_memories(ann));
  CHECK(recall(ann).ids.empty());
  CHECK(f.memory->recall_reads() == 1);
  CHECK(f.memory->known_without_memories(ann));
  // Known now: no read of the database.
  CHECK(recall(ann).text.empty());
  CHECK(f.memory->recall_reads() == 1);
  CHECK(recall(bob).ids.empty());
  CHECK(f.memory->recall_reads() == 2);
  CHECK(f.memory->known_without_memories(bob));
  // A candidate is no active memory: read again, and known empty again.
  REQUIRE(f.run(write_one(f.memory, ann, propose_change(ann, "editor", "editor: vim", false))));
  CHECK_FALSE(f.memory->known_without_memories(ann));
  CHECK(f.memory->known_without_memories(bob)); // another user's write leaves bob's alone
  CHECK(recall(ann).ids.empty());
  CHECK(f.memory->recall_reads() == 3);
  CHECK(f.memory->known_without_memories(ann));
  // An active item: recalled at once.
  REQUIRE(f.run(write_one(f.memory, ann, propose_change(ann, "shell", "shell: fish", true))));
  CHECK_FALSE(f.memory->known_without_memories(ann));
  request.objective = "which shell do I use?";
  const auto block = recall(ann);
  CHECK(f.memory->recall_reads() == 4);
  CHECK(block.ids.size() == 1);
  CHECK_THAT(block.text, Catch::Contains("shell: fish"));
  CHECK_FALSE(f.memory->known_without_memories(ann));
  // An objective that matches none of ann's items: still not known empty (she has one).
  request.objective = "zzz qqq";
  CHECK(recall(ann).ids.empty());
  CHECK_FALSE(f.memory->known_without_memories(ann));
}
