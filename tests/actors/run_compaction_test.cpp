// Compaction waits for the conversation's pending memory writes (issues 15 and 16): a
// memory change still queued in the user's memory writer — as when the memory tool call
// that made it timed out or was cancelled — is durable before the summariser is asked.
// The change is held by a gate in front of the store writer until the test opens it.

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <tuple>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include "actors/run_fixture.hpp"
#include "troupe/actors/memory_service.hpp"
#include "troupe/actors/store_writer.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/storage/database.hpp"
#include "troupe/storage/memory.hpp"
#include "troupe/storage/repositories.hpp"

using namespace troupe;
using namespace troupe::test;
using namespace std::chrono_literals;
using storage::run_status;

namespace {

namespace asio = boost::asio;

using open_atom = caf::atom_constant<caf::atom("open")>;

/// A store writer in front of the real one that holds every write until it is opened.
using gate_actor = actors::store_writer_actor::extend<caf::reacts_to<open_atom>>;

struct gate_state {
  actors::store_writer_actor real;
  bool open = false;
  std::vector<std::tuple<storage::write_op, caf::typed_response_promise<actors::write_result>>>
      held;
  std::shared_ptr<std::atomic<int>> holding;
};

void pass_on(caf::stateful_actor<gate_state, gate_actor::base>* self, storage::write_op op,
             caf::typed_response_promise<actors::write_result> promise) {
  self->request(self->state.real, actors::store_write_timeout, actors::write_atom::value,
                std::move(op))
      .then([promise](actors::write_result& r) mutable { promise.deliver(std::move(r)); },
            [promise](caf::error& e) mutable {
              promise.deliver(actors::write_result{tl::unexpected(actors::from_caf_error(e))});
            });
}

gate_actor::behavior_type gate(caf::stateful_actor<gate_state, gate_actor::base>* self,
                               actors::store_writer_actor real,
                               std::shared_ptr<std::atomic<int>> holding) {
  self->state.real = std::move(real);
  self->state.holding = std::move(holding);
  return {
      [self](actors::write_atom, storage::write_op& op) -> caf::result<actors::write_result> {
        auto promise = self->make_response_promise<actors::write_result>();
        if (self->state.open) {
          pass_on(self, std::move(op), promise);
        } else {
          self->state.held.emplace_back(std::move(op), promise);
          ++*self->state.holding;
        }
        return promise;
      },
      [self](actors::stats_atom) -> caf::result<actors::store_writer_stats> {
        return self->delegate(self->state.real, actors::stats_atom::value);
      },
      [](actors::flush_atom, std::uint64_t) {},
      [](actors::index_tick_atom) {},
      [self](actors::index_atom) -> caf::result<std::uint64_t> {
        return self->delegate(self->state.real, actors::index_atom::value);
      },
      [self](open_atom) {
        self->state.open = true;
        for (auto& [op, promise] : self->state.held) {
          pass_on(self, std::move(op), promise);
        }
        self->state.held.clear();
      },
  };
}

asio::awaitable<expected<storage::memory_write_result>>
write_one(std::shared_ptr<actors::memory_service> memory, storage::row_id user,
          storage::memory_change change) {
  auto writing = memory->write(user, std::move(change));
  co_return co_await std::move(writing);
}

/// Eight turns of earlier conversation: more than head + tail + middle below.
std::vector<chat_message> earlier_turns() {
  std::vector<chat_message> out;
  for (int i = 0; i < 4; ++i) {
    out.push_back({chat_role::user, "earlier question " + std::to_string(i), {}, {}, {}});
    out.push_back({chat_role::assistant, "earlier answer " + std::to_string(i), {}, {}, {}});
  }
  return out;
}

constexpr const char* summariser_script = R"([
  {"match":{"prompt":"You compress the earlier part of a conversation"},
   "reply":{"text":"## Goal\nSUMMARY"}},
  {"match":{},"reply":{"text":"Answered from the summary."}}])";

} // namespace

TEST_CASE("a conversation compacts only once the memory writes it queued are durable, also one "
          "whose tool call gave up on it",
          "[actors][memory][compression]") {
  const bool forced = GENERATE(true, false);
  INFO((forced ? "/compact" : "automatic compression"));
  run_world w(summariser_script);

  // Storage with ann's conversation, the real store writer behind a closed gate, and the
  // memory service over the gate.
  storage::testing::temp_dir dir;
  auto conn = storage::testing::must(storage::open_writer(dir.db(), storage::sync_mode::normal));
  storage::user_record ann_row;
  ann_row.name = "ann";
  const auto ann = storage::testing::must(storage::insert_user(conn, ann_row));
  storage::agent_record agent_row;
  agent_row.uuid = "agent";
  agent_row.name = "agent";
  agent_row.main_model = "m";
  const auto agent = storage::testing::must(storage::insert_agent(conn, agent_row));
  storage::conversation_record c;
  c.uuid = "conv";
  c.owner_user_id = ann;
  c.agent_id = agent;
  const auto conversation = storage::testing::must(storage::insert_conversation(conn, c));
  auto real = actors::spawn_store_writer(
      w.system(), std::make_shared<storage::connection>(std::move(conn)), {});
  auto holding = std::make_shared<std::atomic<int>>(0);
  auto gated = w.system().spawn(gate, real, holding);
  auto reads = storage::testing::must(storage::read_pool::open(dir.db(), 2));
  auto memory = std::make_shared<actors::memory_service>(
      w.system(), caf::actor_cast<actors::store_writer_actor>(gated), reads, nullptr);

  // A memory change of this conversation, queued in ann's writer and held: its caller
  // (a memory tool call) may have given up on it, the change is still to be applied.
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread io_thread([&io] { io.run(); });
  storage::memory_change change;
  change.conversation = conversation;
  change.proposal.uuid = new_uuid();
  change.proposal.user_id = ann;
  change.proposal.key = "shell";
  change.proposal.content = "uses the fish shell";
  change.proposal.active = true;
  change.proposal.actor = "run:earlier";
  change.proposal.conversation_id = conversation;
  auto pending = asio::co_spawn(io, write_one(memory, ann, change), asio::use_future);
  REQUIRE(wait_until([&] { return holding->load() == 1; }, 10s));

  auto spec = w.spec(forced ? "/compact" : "What do I use?", {"finish"});
  spec.history = earlier_turns();
  spec.owner_user = ann;
  spec.conversation_row = conversation;
  spec.agent_row = agent;
  spec.io.memory = memory;
  spec.compact_only = forced;
  spec.agent.fast_model = "fast";
  spec.agent.compression.protect_head = 1;
  spec.agent.compression.protect_tail = 2;
  spec.agent.compression.min_middle = 2;
  // Automatic: a window the history passes half of.
  spec.agent.context_window = 200;
  auto run = w.spawn(std::move(spec));
  caf::scoped_actor self{w.system()};
  auto asked = self->request(run, 60s, actors::run_atom::value);

  // While the change is held the summariser is not asked.
  CHECK_FALSE(wait_until([&] { return w.llm_calls() > 0; }, 750ms));
  CHECK(w.llm_calls() == 0);
  caf::anon_send(gated, open_atom::value);
  REQUIRE(pending.wait_for(30s) == std::future_status::ready);
  const auto written = pending.get();
  REQUIRE(written);
  CHECK(written->outcome == storage::memory_outcome::created);

  std::optional<actors::run_result> result;
  std::move(asked).receive([&](actors::run_result& r) { result = std::move(r); },
                           [&](caf::error& e) { FAIL("the run failed: " << caf::to_string(e)); });
  REQUIRE(result);
  CHECK(result->status == run_status::succeeded);
  if (forced) {
    CHECK_THAT(result->text, Catch::StartsWith("Compressed "));
  } else {
    CHECK(result->text == "Answered from the summary.");
  }
  CHECK(find_step(*result, "context.compressed") != nullptr);
  // The item was durable before the summary: the summariser came after the gate opened.
  memory->stop();
  work.reset();
  io_thread.join();
  caf::anon_send_exit(gated, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(real, caf::exit_reason::user_shutdown);
}
