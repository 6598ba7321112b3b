// What recalling memories adds to a run: `recall_memories` (the full-text ranked items and
// the pinned ones) and `render_block` (the `<memory_context>` text), for a user with
// TROUPE_BENCH_MEMORIES items (default 2000, so the ctest smoke run stays fast; the
// recorded figure uses 10000) among as many of another user's. Reports the mean per
// recall and, as counters, the p50 and p99 over the run's iterations, of wall time and
// of the recalling thread's CPU time.

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "troupe/runtime/memory_rules.hpp"
#include "troupe/storage/database.hpp"
#include "troupe/storage/memory.hpp"
#include "troupe/storage/repositories.hpp"

namespace {

using namespace troupe;
using namespace troupe::storage;

constexpr int vocabulary_size = 5000;

std::int64_t memory_count() {
  if (const char* env = std::getenv("TROUPE_BENCH_MEMORIES")) {
    return std::max<std::int64_t>(100, std::atoll(env));
  }
  return 2000;
}

std::string word(int i) {
  static const char* syllables[] = {"ba", "be", "bi", "bo", "bu", "da", "de", "di", "do", "du",
                                    "ka", "ke", "ki", "ko", "ku", "la", "le", "li", "lo", "lu"};
  std::string out;
  do {
    out += syllables[i % 20];
    i /= 20;
  } while (i > 0);
  return out + "m";
}

// Zipf-like: a few words are common, most rare.
int pick_word(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  return static_cast<int>(std::pow(static_cast<double>(vocabulary_size), u(rng))) - 1;
}

std::string sentence(std::mt19937_64& rng, int words) {
  std::string out;
  for (int w = 0; w < words; ++w) {
    out += w == 0 ? "" : " ";
    out += word(pick_word(rng));
  }
  return out;
}

struct memory_corpus {
  std::filesystem::path dir;
  std::shared_ptr<read_pool> reads;
  row_id user = 0;
  row_id agent = 0;

  memory_corpus() {
    const auto n = memory_count();
    dir = std::filesystem::temp_directory_path() / fmt::format("troupe-memory-bench-{}", n);
    const auto path = dir / "troupe.db";
    if (!std::filesystem::exists(path)) {
      std::filesystem::create_directories(dir);
      auto c = open_writer(path, sync_mode::normal);
      if (!c) {
        throw std::runtime_error(c.error().message);
      }
      std::mt19937_64 rng(7);
      auto filled = in_transaction(*c, [&](connection& conn) -> expected<void> {
        agent_record a;
        a.uuid = "bench-agent";
        a.name = "bench";
        a.main_model = "m";
        auto agent_id = insert_agent(conn, a);
        if (!agent_id) {
          return tl::unexpected(agent_id.error());
        }
        for (const char* name : {"reader", "neighbour"}) {
          user_record u;
          u.name = name;
          auto id = insert_user(conn, u);
          if (!id) {
            return tl::unexpected(id.error());
          }
          for (std::int64_t i = 0; i < n; ++i) {
            const bool agent_scoped = i % 5 == 0;
            auto ok = conn.run(
                "INSERT INTO memory_items (uuid, user_id, agent_id, scope, kind, memory_key, "
                "content, summary, importance, status, pinned, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, 'fact', ?, ?, '', ?, ?, ?, 1, 1)",
                fmt::format("{}-{}", name, i), *id,
                agent_scoped ? std::optional<row_id>(*agent_id) : std::nullopt,
                agent_scoped ? "agent_user" : "user", fmt::format("key{}", i), sentence(rng, 18),
                static_cast<std::int64_t>(1 + i % 100), i % 10 == 9 ? "superseded" : "active",
                i % 997 == 0);
            if (!ok) {
              return ok;
            }
          }
        }
        return {};
      });
      if (!filled) {
        throw std::runtime_error(filled.error().message);
      }
    }
    auto pool = read_pool::open(path, 1);
    if (!pool) {
      throw std::runtime_error(pool.error().message);
    }
    reads = std::move(*pool);
    reads->with([&](connection& c) {
      user = find_user_by_name(c, "reader").value().id;
      agent = find_agent_by_uuid(c, "bench-agent").value().id;
      return 0;
    });
  }
};

// This thread's CPU time so far, in microseconds.
double thread_cpu_micros() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

memory_corpus& corpus() {
  static memory_corpus c;
  return c;
}

void BM_memory_recall(benchmark::State& state) {
  auto& c = corpus();
  std::mt19937_64 rng(11);
  std::vector<double> micros;
  std::vector<double> cpu_micros;
  std::size_t items = 0;
  for (auto _ : state) {
    state.PauseTiming();
    // An objective as a user writes it: a question with stop words and a few content words.
    recall_query q;
    q.user_id = c.user;
    q.agent_id = c.agent;
    q.text = "what do I know about " + sentence(rng, 6) + " and the rest?";
    state.ResumeTiming();
    const auto start = std::chrono::steady_clock::now();
    const auto cpu_start = thread_cpu_micros();
    auto block = c.reads->with([&](connection& conn) -> expected<memory::rendered_block> {
      auto found = recall_memories(conn, q);
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
      return memory::render_block(ranked, pinned, memory::block_limits{});
    });
    micros.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count());
    cpu_micros.push_back(thread_cpu_micros() - cpu_start);
    if (!block) {
      state.SkipWithError(block.error().message.c_str());
      return;
    }
    items += block->ids.size();
    benchmark::DoNotOptimize(block->text);
  }
  std::sort(micros.begin(), micros.end());
  std::sort(cpu_micros.begin(), cpu_micros.end());
  const auto at = [](const std::vector<double>& sorted, double p) {
    return sorted[std::min(sorted.size() - 1,
                           static_cast<std::size_t>(p * static_cast<double>(sorted.size())))];
  };
  if (!micros.empty()) {
    state.counters["p50_us"] = at(micros, 0.50);
    state.counters["p99_us"] = at(micros, 0.99);
    // The recall's own CPU time (this thread's), which the machine's other load does not
    // inflate the way it inflates wall time on a shared machine.
    state.counters["cpu_p50_us"] = at(cpu_micros, 0.50);
    state.counters["cpu_p99_us"] = at(cpu_micros, 0.99);
    state.counters["items_per_block"] =
        static_cast<double>(items) / static_cast<double>(micros.size());
    state.counters["user_items"] = static_cast<double>(memory_count());
  }
}
BENCHMARK(BM_memory_recall)->Unit(benchmark::kMicrosecond);

} // namespace
