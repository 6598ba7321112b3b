// What a run's memory block costs beyond the recall query itself (issue 15): the hop a
// run makes through `memory_service::recall` (from the io thread to the blocking pool
// and back), beside the same recall made on the calling thread, and the `used` evidence
// write through the store writer (one write of the block's items, answered once
// durable). The corpus is smaller than the storage bench's 10,000 items
// (TROUPE_BENCH_MEMORIES, default 1,000): the hop and the write do not depend on it.

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <fmt/format.h>

#include "troupe/actors/memory_service.hpp"
#include "troupe/actors/store_writer.hpp"
#include "troupe/storage/database.hpp"
#include "troupe/storage/memory.hpp"
#include "troupe/storage/repositories.hpp"

namespace {

using namespace troupe;
using namespace troupe::actors;
using namespace troupe::storage;
namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;

std::string sentence(std::mt19937_64& rng, int words) {
  std::string out;
  for (int i = 0; i < words; ++i) {
    out += fmt::format("{}w{}", i == 0 ? "" : " ", rng() % 500);
  }
  return out;
}

std::int64_t corpus_size() {
  const char* v = std::getenv("TROUPE_BENCH_MEMORIES");
  return v != nullptr ? std::max<std::int64_t>(1, std::atoll(v)) : 1000;
}

struct memory_world {
  std::filesystem::path dir;
  row_id user = 0;
  row_id agent = 0;
  row_id conversation = 0;
  row_id run = 0;
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> system;
  store_writer_actor writer;
  std::shared_ptr<read_pool> reads;
  std::shared_ptr<memory_service> memory;
  asio::io_context io;
  std::unique_ptr<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::thread io_thread;

  memory_world() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "troupe-memory-bench-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::abort();
    }
    dir = pattern;
    auto conn = open_writer(dir / "troupe.db", sync_mode::normal);
    if (!conn) {
      fmt::print(stderr, "{}\n", conn.error().message);
      std::abort();
    }
    user_record u;
    u.name = "reader";
    user = insert_user(*conn, u).value();
    agent_record a;
    a.uuid = "bench-agent";
    a.name = "bench-agent";
    a.main_model = "m";
    agent = insert_agent(*conn, a).value();
    conversation_record c;
    c.uuid = "c";
    c.owner_user_id = user;
    c.agent_id = agent;
    conversation = insert_conversation(*conn, c).value();
    run_record r;
    r.uuid = "r";
    r.conversation_id = conversation;
    r.agent_id = agent;
    r.model = "m";
    run = insert_run(*conn, r).value();
    std::mt19937_64 rng(7);
    const auto n = corpus_size();
    auto filled = in_transaction(*conn, [&](connection& tx) -> expected<void> {
      for (std::int64_t i = 0; i < n; ++i) {
        auto ok = tx.run("INSERT INTO memory_items (uuid, user_id, scope, kind, memory_key, "
                         "content, importance, status, pinned, created_at, updated_at) VALUES "
                         "(?, ?, 'user', 'fact', ?, ?, ?, 'active', ?, 1, 1)",
                         fmt::format("m-{}", i), user, fmt::format("key{}", i), sentence(rng, 18),
                         static_cast<std::int64_t>(1 + i % 100), i % 997 == 0);
        if (!ok) {
          return ok;
        }
      }
      return {};
    });
    if (!filled || !ensure_memory_index(*conn)) {
      std::abort();
    }
    system = std::make_unique<caf::actor_system>(config);
    writer = spawn_store_writer(*system, std::make_shared<connection>(std::move(*conn)), {});
    reads = read_pool::open(dir / "troupe.db", 2).value();
    memory = std::make_shared<memory_service>(*system, writer, reads, nullptr);
    work = std::make_unique<asio::executor_work_guard<asio::io_context::executor_type>>(
        io.get_executor());
    io_thread = std::thread([this] { io.run(); });
  }
  ~memory_world() {
    // Everything that holds an actor handle or the system goes before the system does.
    memory->stop();
    memory.reset();
    work.reset();
    io_thread.join();
    caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
    writer = store_writer_actor{};
    reads.reset();
    system.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

memory_world& world() {
  static memory_world w;
  return w;
}

void report(benchmark::State& state, std::vector<double>& micros) {
  std::sort(micros.begin(), micros.end());
  if (micros.empty()) {
    return;
  }
  const auto at = [&](double p) {
    return micros[std::min(micros.size() - 1,
                           static_cast<std::size_t>(p * static_cast<double>(micros.size())))];
  };
  state.counters["p50_us"] = at(0.50);
  state.counters["p99_us"] = at(0.99);
}

memory_recall_request request_for(memory_world& w, std::mt19937_64& rng) {
  memory_recall_request q;
  q.user = w.user;
  q.agent = w.agent;
  q.objective = "what do I know about " + sentence(rng, 6) + "?";
  return q;
}

/// The recall and rendering on the calling thread: the storage bench's figure.
void BM_memory_recall_here(benchmark::State& state) {
  auto& w = world();
  std::mt19937_64 rng(11);
  std::vector<double> micros;
  for (auto _ : state) {
    auto q = request_for(w, rng);
    const auto start = clock_type::now();
    auto block = w.reads->with([&](connection& c) -> expected<memory::rendered_block> {
      recall_query rq;
      rq.user_id = q.user;
      rq.agent_id = q.agent;
      rq.text = q.objective;
      auto found = recall_memories(c, rq);
      if (!found) {
        return tl::unexpected(found.error());
      }
      std::vector<memory::block_item> ranked;
      std::vector<memory::block_item> pinned;
      for (const auto& m : found->ranked) {
        ranked.push_back({m.id, m.kind, m.memory_key, m.content, m.summary, m.pinned});
      }
      for (const auto& m : found->pinned) {
        pinned.push_back({m.id, m.kind, m.memory_key, m.content, m.summary, m.pinned});
      }
      return memory::render_block(ranked, pinned, q.limits);
    });
    micros.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - start).count());
    benchmark::DoNotOptimize(block);
  }
  report(state, micros);
}
BENCHMARK(BM_memory_recall_here)->Unit(benchmark::kMicrosecond);

asio::awaitable<expected<memory::rendered_block>> recall_on(std::shared_ptr<memory_service> m,
                                                            memory_recall_request q) {
  auto recalling = m->recall(std::move(q));
  co_return co_await std::move(recalling);
}

/// The same recall as a run makes it: a coroutine on the io thread that hands it to the
/// blocking pool and resumes with the block.
void BM_memory_recall_through_service(benchmark::State& state) {
  auto& w = world();
  std::mt19937_64 rng(11);
  std::vector<double> micros;
  for (auto _ : state) {
    auto q = request_for(w, rng);
    const auto start = clock_type::now();
    auto block = asio::co_spawn(w.io, recall_on(w.memory, std::move(q)), asio::use_future).get();
    micros.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - start).count());
    if (!block) {
      state.SkipWithError(block.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(block);
  }
  report(state, micros);
}
BENCHMARK(BM_memory_recall_through_service)->Unit(benchmark::kMicrosecond);

asio::awaitable<write_result> write_on(caf::actor_system& system, store_writer_actor writer,
                                       write_op op) {
  auto writing = write(system, std::move(writer), std::move(op), store_write_timeout);
  co_return co_await std::move(writing);
}

/// A block of six items' `used` evidence: one write through the store writer, answered
/// once committed (synchronous = normal).
void BM_memory_used_evidence(benchmark::State& state) {
  auto& w = world();
  std::vector<double> micros;
  std::vector<row_id> ids;
  for (row_id i = 1; i <= 6; ++i) {
    ids.push_back(i * 97);
  }
  for (auto _ : state) {
    auto op = make_write("record memory use", [ids, run = w.run, conv = w.conversation](auto& c) {
      return record_memory_use(c, ids, run, conv);
    });
    const auto start = clock_type::now();
    auto done =
        asio::co_spawn(w.io, write_on(*w.system, w.writer, std::move(op)), asio::use_future).get();
    micros.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - start).count());
    if (!done) {
      state.SkipWithError(done.error().message.c_str());
      return;
    }
  }
  report(state, micros);
}
BENCHMARK(BM_memory_used_evidence)->Unit(benchmark::kMicrosecond);

} // namespace
