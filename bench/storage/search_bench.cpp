// Session search latency on a large messages table. The table is generated once into
// a file under the temp directory and reused. Size: TROUPE_BENCH_MESSAGES (default 20000,
// so the ctest smoke run stays fast; the recorded figures use 1000000).

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

#include "troupe/storage/batch.hpp"
#include "troupe/storage/database.hpp"
#include "troupe/storage/message_index.hpp"
#include "troupe/storage/repositories.hpp"
#include "troupe/storage/schema.hpp"
#include "troupe/storage/search.hpp"

namespace {

using namespace troupe;
using namespace troupe::storage;

constexpr int users = 100;
constexpr int conversations_per_user = 20;
constexpr int vocabulary_size = 20000;

std::int64_t message_count() {
  if (const char* env = std::getenv("TROUPE_BENCH_MESSAGES")) {
    return std::max<std::int64_t>(1000, std::atoll(env));
  }
  return 20000;
}

std::string word(int i) {
  // Pronounceable, distinct words: w0 -> "ba", w1 -> "be", …
  static const char* syllables[] = {"ba", "be", "bi", "bo", "bu", "da", "de", "di", "do", "du",
                                    "ka", "ke", "ki", "ko", "ku", "la", "le", "li", "lo", "lu",
                                    "ma", "me", "mi", "mo", "mu", "na", "ne", "ni", "no", "nu"};
  std::string out;
  do {
    out += syllables[i % 30];
    i /= 30;
  } while (i > 0);
  return out + "x";
}

// Zipf-like word choice: a few words are common, most are rare (as in real text).
int pick_word(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double x = u(rng);
  return static_cast<int>(std::pow(static_cast<double>(vocabulary_size), x)) - 1;
}

struct corpus {
  std::filesystem::path path;
  std::int64_t messages = 0;
};

void die(const error& e) {
  fmt::print(stderr, "search_bench: {}\n", e.message);
  std::exit(1);
}

template <class T> T must(expected<T> v) {
  if (!v) {
    die(v.error());
  }
  return std::move(*v);
}
void must(expected<void> v) {
  if (!v) {
    die(v.error());
  }
}

const corpus& the_corpus() {
  static const corpus c = [] {
    corpus out;
    out.messages = message_count();
    out.path = std::filesystem::temp_directory_path() /
               fmt::format("troupe-search-bench-v{}-{}.db", latest_schema_version(), out.messages);
    if (std::filesystem::exists(out.path)) {
      auto conn = must(connection::open(out.path));
      auto n = conn.query_int("SELECT count(*) FROM messages");
      if (n && *n == out.messages) {
        return out;
      }
      conn = connection();
      std::filesystem::remove(out.path);
    }
    const auto tmp = out.path.string() + ".tmp";
    std::filesystem::remove(tmp);
    std::filesystem::remove(tmp + "-wal");
    std::filesystem::remove(tmp + "-shm");
    auto db = must(open_writer(tmp, sync_mode::normal));
    std::mt19937_64 rng(42);
    std::vector<row_id> conversations;
    must(in_transaction(db, [&](connection& conn) -> expected<void> {
      agent_record a;
      a.uuid = "bench-agent";
      a.name = "bench";
      a.main_model = "m";
      const auto agent = must(insert_agent(conn, a));
      for (int u = 0; u < users; ++u) {
        user_record user;
        user.name = fmt::format("user{}", u);
        const auto uid = must(insert_user(conn, user));
        for (int k = 0; k < conversations_per_user; ++k) {
          conversation_record cr;
          cr.uuid = fmt::format("conv-{}-{}", u, k);
          cr.owner_user_id = uid;
          cr.agent_id = agent;
          conversations.push_back(must(insert_conversation(conn, cr)));
        }
      }
      return {};
    }));
    std::uniform_int_distribution<std::size_t> conv(0, conversations.size() - 1);
    std::uniform_int_distribution<int> length(8, 40);
    std::int64_t done = 0;
    while (done < out.messages) {
      must(in_transaction(db, [&](connection& conn) -> expected<void> {
        for (int i = 0; i < 50000 && done < out.messages; ++i, ++done) {
          message_record m;
          m.conversation_id = conversations[conv(rng)];
          m.role = (done % 2 == 0) ? "user" : "assistant";
          const int n = length(rng);
          for (int w = 0; w < n; ++w) {
            if (w > 0) {
              m.content += ' ';
            }
            m.content += word(pick_word(rng));
          }
          m.created_at = 1'700'000'000'000 + done;
          must(insert_message(conn, m));
        }
        return {};
      }));
    }
    // As the store writer does a moment after each commit (message_index.hpp).
    while (must(index_pending_messages(db, 100'000)) > 0) {
    }
    must(db.exec("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')"));
    db = connection();
    std::filesystem::rename(tmp, out.path);
    std::filesystem::remove(tmp + "-wal");
    std::filesystem::remove(tmp + "-shm");
    return out;
  }();
  return c;
}

void report_percentiles(benchmark::State& state, std::vector<double>& micros) {
  if (micros.empty()) {
    return;
  }
  std::sort(micros.begin(), micros.end());
  auto at = [&](double q) {
    return micros[std::min(micros.size() - 1,
                           static_cast<std::size_t>(q * static_cast<double>(micros.size())))];
  };
  state.counters["p50_us"] = at(0.50);
  state.counters["p99_us"] = at(0.99);
  state.counters["max_us"] = micros.back();
  state.counters["messages"] = static_cast<double>(the_corpus().messages);
}

void search_benchmark(benchmark::State& state, search_engine_kind engine) {
  const auto& c = the_corpus();
  auto pool = must(read_pool::open(c.path, 1));
  auto lease = pool->acquire();
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> user(1, users);
  std::uniform_int_distribution<int> terms(1, 3);
  std::vector<double> micros;
  std::int64_t hits = 0;
  for (auto _ : state) {
    search_query q;
    q.owner_user_id = user(rng);
    q.limit = 20;
    q.engine = engine;
    const int n = terms(rng);
    for (int i = 0; i < n; ++i) {
      q.text += word(pick_word(rng)) + " ";
    }
    const auto start = std::chrono::steady_clock::now();
    auto result = search_messages(*lease, q);
    const auto end = std::chrono::steady_clock::now();
    if (!result) {
      state.SkipWithError(result.error().message.c_str());
      break;
    }
    hits += static_cast<std::int64_t>(result->size());
    micros.push_back(std::chrono::duration<double, std::micro>(end - start).count());
  }
  state.counters["hits_per_query"] =
      micros.empty() ? 0.0 : static_cast<double>(hits) / static_cast<double>(micros.size());
  report_percentiles(state, micros);
}

void BM_search_fts(benchmark::State& state) {
  search_benchmark(state, search_engine_kind::fts);
}
BENCHMARK(BM_search_fts)->Unit(benchmark::kMicrosecond);

// The fallback scans the owner's messages: linear in their count.
void BM_search_like(benchmark::State& state) {
  search_benchmark(state, search_engine_kind::like);
}
BENCHMARK(BM_search_like)->Unit(benchmark::kMicrosecond);

} // namespace

namespace {

// Group commit without the actor: 1000 message inserts per transaction through
// apply_batch (a savepoint per write), to separate SQLite's cost from messaging.
void BM_apply_batch(benchmark::State& state) {
  const auto dir = std::filesystem::temp_directory_path() / "troupe-batch-bench.db";
  std::filesystem::remove(dir);
  std::filesystem::remove(dir.string() + "-wal");
  std::filesystem::remove(dir.string() + "-shm");
  auto db = must(open_writer(dir, sync_mode::normal));
  user_record u;
  u.name = "u";
  agent_record a;
  a.uuid = "a";
  a.name = "a";
  a.main_model = "m";
  conversation_record c;
  c.uuid = "c";
  c.owner_user_id = must(insert_user(db, u));
  c.agent_id = must(insert_agent(db, a));
  const auto conv = must(insert_conversation(db, c));
  std::int64_t i = 0;
  for (auto _ : state) {
    std::vector<write_op> ops;
    ops.reserve(1000);
    for (int k = 0; k < 1000; ++k) {
      message_record m;
      m.conversation_id = conv;
      m.role = "assistant";
      m.content = fmt::format("message {} about deploying the service and checking the logs", i++);
      ops.push_back(append_message_op(std::move(m)));
    }
    auto results = apply_batch(db, ops);
    benchmark::DoNotOptimize(results);
  }
  state.SetItemsProcessed(state.iterations() * 1000);
}
BENCHMARK(BM_apply_batch)->Unit(benchmark::kMillisecond);

} // namespace
