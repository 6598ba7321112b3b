// Writes through the store_writer actor: throughput with group commit and the latency a
// caller sees (send to durable answer). Each iteration writes `total` messages with
// `window` writes in flight, as many concurrent callers would.

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "troupe/actors/store_writer.hpp"
#include "troupe/storage/database.hpp"
#include "troupe/storage/repositories.hpp"

namespace {

using namespace troupe;
using namespace troupe::actors;
using namespace troupe::storage;
using clock_type = std::chrono::steady_clock;

struct bench_db {
  std::filesystem::path dir;
  row_id conversation = 0;

  explicit bench_db(sync_mode sync) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "troupe-writer-bench-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::abort();
    }
    dir = pattern;
    auto conn = open_writer(dir / "troupe.db", sync);
    if (!conn) {
      fmt::print(stderr, "{}\n", conn.error().message);
      std::abort();
    }
    user_record u;
    u.name = "bench";
    agent_record a;
    a.uuid = "a";
    a.name = "a";
    a.main_model = "m";
    conversation_record c;
    c.uuid = "c";
    c.owner_user_id = insert_user(*conn, u).value();
    c.agent_id = insert_agent(*conn, a).value();
    conversation = insert_conversation(*conn, c).value();
    writer_connection = std::make_shared<connection>(std::move(*conn));
  }
  ~bench_db() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::shared_ptr<connection> writer_connection;
};

write_op message_op(row_id conversation, std::int64_t i) {
  message_record m;
  m.conversation_id = conversation;
  m.role = "assistant";
  m.content = fmt::format("message {} about deploying the service and checking the logs", i);
  m.completion_tokens = 12;
  return append_message_op(std::move(m));
}

// Args: window (writes in flight), group_commit_ms, synchronous (0 normal, 1 full).
void BM_writer_inserts(benchmark::State& state) {
  const auto window = static_cast<std::size_t>(state.range(0));
  const auto group_ms = std::chrono::milliseconds(state.range(1));
  const auto sync = state.range(2) == 0 ? sync_mode::normal : sync_mode::full;
  // Enough writes to fill many batches, few enough that one caller at a time (each write
  // waiting for its own commit) keeps the smoke run short.
  const std::int64_t total = std::clamp<std::int64_t>(state.range(0) * 100, 500, 20000);
  bench_db db(sync);
  // As `troupe serve` runs it (actors.scheduler_policy = sharing): the work-stealing
  // workers' idle polling would take CPU from the writer thread on a 2-core machine.
  caf::actor_system_config config;
  config.set("scheduler.policy", caf::atom("sharing"));
  caf::actor_system system{config};
  auto writer = spawn_store_writer(system, db.writer_connection, {group_ms, 1024});
  db.writer_connection.reset();
  caf::scoped_actor self{system};
  std::vector<double> micros;
  micros.reserve(static_cast<std::size_t>(total) * 4);
  std::int64_t next = 0;
  std::int64_t errors = 0;
  for (auto _ : state) {
    std::deque<clock_type::time_point> sent;
    std::int64_t issued = 0;
    std::int64_t answered = 0;
    auto send_one = [&] {
      sent.push_back(clock_type::now());
      self->send(writer, write_atom::value, message_op(db.conversation, next++));
      ++issued;
    };
    while (issued < total && sent.size() < window) {
      send_one();
    }
    while (answered < total) {
      self->receive([&](write_result& r) {
        micros.push_back(
            std::chrono::duration<double, std::micro>(clock_type::now() - sent.front()).count());
        sent.pop_front();
        ++answered;
        if (!r) {
          ++errors;
        }
        if (issued < total) {
          send_one();
        }
      });
    }
  }
  state.SetItemsProcessed(state.iterations() * total);
  auto stats = writer_stats(system, writer);
  if (stats && stats->batches > 0) {
    state.counters["rows_per_commit"] =
        static_cast<double>(stats->writes) / static_cast<double>(stats->batches);
  }
  std::sort(micros.begin(), micros.end());
  if (!micros.empty()) {
    auto at = [&](double q) {
      return micros[std::min(micros.size() - 1,
                             static_cast<std::size_t>(q * static_cast<double>(micros.size())))];
    };
    state.counters["p50_us"] = at(0.5);
    state.counters["p99_us"] = at(0.99);
  }
  state.counters["errors"] = static_cast<double>(errors);
  caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
}
BENCHMARK(BM_writer_inserts)
    ->ArgNames({"window", "group_ms", "full"})
    ->Args({1, 0, 0})
    ->Args({1, 2, 0})
    ->Args({64, 2, 0})
    ->Args({64, 0, 0})
    ->Args({1024, 0, 0})
    ->Args({1024, 2, 0})
    ->Args({4096, 2, 0})
    ->Args({1024, 2, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

} // namespace
