// The scenarios that run against troupe's chat API: agent, storage and idle.

#include <sqlite3.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include "scenario_support.hpp"
#include "troupe/bench/process_stats.hpp"
#include "troupe/net/sse_parser.hpp"

namespace troupe::bench::detail {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

/// The peers' task (bench/peers/lib/harness.mjs): any text works with the script, the
/// same text keeps the requests alike.
constexpr std::string_view agent_task =
    "Read the file input.txt and tell me in one sentence what it is.";
/// Only mock-llm's scripted final answer contains this.
constexpr std::string_view answer_marker = "[agent-scenario answer from mock-llm]";
/// The one-round task (bench/peers/openclaw): one model round, no tool. mock-llm's first
/// rule in agent_scenario.jsonl answers it with a text carrying `one_round_marker`.
constexpr std::string_view one_round_message = "[bench one-round] Say hello in one sentence.";
constexpr std::string_view one_round_marker = "[one-round answer from mock-llm]";
constexpr std::string_view setup_message = "[troupe bench setup] hello";
constexpr std::string_view idle_message = "[troupe bench idle] hello again";
/// Sequential unrecorded runs before the measured load (as the peers do).
constexpr unsigned warmup_runs = 20;
/// Settings of a troupe started for the agent and storage scenarios: a finished run's
/// journal and a finished conversation leave memory after a second instead of 15 and 10
/// minutes, so that memory at peak is what runs in flight hold (the peers keep nothing
/// after a run). `--troupe-set` overrides them.
const std::vector<std::pair<std::string, std::string>> agent_settings = {
    {"api.run_retention_ms", "1000"}, {"actors.conversation_idle_ms", "1000"}};

/// Rules in front of the scenario's script: set-up messages get a one-round text answer;
/// idle messages get an answer that starts an hour later (the run waits on the model).
constexpr std::string_view bench_rules =
    R"({"match":{"user":"[troupe bench setup]"},"reply":{"text":"ready"}}
{"match":{"user":"[troupe bench idle]"},"ttft_ms":3600000,"reply":{"text":"late"}}
)";

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string agent_script_path(const scenario_options& o) {
  return o.agent_script.empty() ? std::string(TROUPE_BENCH_PEERS_DIR) + "/agent_scenario.jsonl"
                                : o.agent_script;
}

std::string agent_fixture_path(const scenario_options& o) {
  return o.agent_fixture.empty() ? std::string(TROUPE_BENCH_PEERS_DIR) + "/fixtures/input.txt"
                                 : o.agent_fixture;
}

expected<mock::mock_llm_options> chat_mock_options(const scenario_options& o, bool agent_script) {
  std::string script(bench_rules);
  if (agent_script) {
    const auto path = agent_script_path(o);
    if (!std::filesystem::exists(path)) {
      return fail(
          errc::not_found,
          fmt::format("cannot read the agent scenario's mock script {} (--agent-script)", path));
    }
    script += read_file(path);
  }
  auto rules = mock::parse_mock_script(script);
  if (!rules) {
    return tl::unexpected(rules.error());
  }
  mock::mock_llm_options options;
  options.rules = std::move(*rules);
  return options;
}

// -- conversations created for the measured runs --

struct creation_state {
  request_template request;
  std::vector<std::string> ids;
};

asio::awaitable<std::optional<std::string>> create_conversation(net::http_client& client,
                                                                creation_state* s,
                                                                std::chrono::milliseconds timeout) {
  std::string body;
  auto pending = send_request(client, &s->request, timeout, &body);
  auto failure = co_await std::move(pending);
  if (failure) {
    co_return failure;
  }
  auto outcome = parse_object(body);
  if (!outcome || string_field(*outcome, "status") != "succeeded" ||
      string_field(*outcome, "conversation_id").empty()) {
    co_return std::string("setup_not_succeeded");
  }
  s->ids.push_back(string_field(*outcome, "conversation_id"));
  co_return std::nullopt;
}

/// Creates `count` conversations of `agent`, each with one set-up exchange.
expected<std::vector<std::string>> create_conversations(const troupe_server& troupe,
                                                        std::string_view agent, std::size_t count,
                                                        const scenario_options& o) {
  creation_state s;
  s.request = troupe_post(troupe, "/api/v1/chat");
  s.request.body =
      fmt::format(R"({{"agent":{},"message":{}}})", json_text(agent), json_text(setup_message));
  auto* sp = &s;
  workload_fn work = [sp](net::http_client& client, std::chrono::milliseconds timeout) {
    return create_conversation(client, sp, timeout);
  };
  load_options lo;
  lo.concurrency = static_cast<unsigned>(std::min<std::size_t>(count, 16));
  lo.max_requests = count;
  lo.duration = std::chrono::minutes(30);
  lo.timeout = std::max(o.timeout, std::chrono::milliseconds(30'000));
  lo.progress_label = o.progress ? "set-up: conversations" : "";
  const auto r = run_load(lo, work);
  if (r.failed > 0 || s.ids.size() != count) {
    std::string kinds;
    for (const auto& [kind, n] : r.errors_by_kind) {
      kinds += fmt::format(" {} x{}", kind, n);
    }
    return fail(errc::unavailable, fmt::format("creating {} conversations failed {} times:{}",
                                               count, r.failed, kinds));
  }
  return std::move(s.ids);
}

/// Puts the peers' fixture into each conversation's workspace,
/// <data-dir>/workspaces/<conversation id>. troupe makes that directory when a tool first
/// uses it, so the bench makes it here; the parent must exist (troupe's layout).
expected<void> seed_workspaces(const std::filesystem::path& data_dir,
                               const std::vector<std::string>& ids, const std::string& fixture) {
  const auto root = data_dir / "workspaces";
  if (!std::filesystem::is_directory(root)) {
    return fail(errc::not_found,
                fmt::format("troupe has no workspaces directory {} (the bench expects "
                            "<data-dir>/workspaces/<conversation id>)",
                            root.string()));
  }
  for (const auto& id : ids) {
    const auto dir = root / id;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return fail(errc::io_error,
                  fmt::format("cannot make the workspace {}: {}", dir.string(), ec.message()));
    }
    std::ofstream out(dir / "input.txt", std::ios::binary | std::ios::trunc);
    out << fixture;
    if (!out) {
      return fail(errc::io_error, fmt::format("cannot write {}", (dir / "input.txt").string()));
    }
  }
  return {};
}

// -- the measured agent runs --

/// Why an outcome does not count as a correct run, or nullopt when it does: succeeded,
/// the mock's scripted answer, and exactly one `read` step that succeeded.
std::optional<std::string> check_agent_outcome(std::string_view body) {
  auto outcome = parse_object(body);
  if (!outcome) {
    return std::string("bad_answer");
  }
  const auto status = string_field(*outcome, "status");
  if (status != "succeeded") {
    return "run_" + (status.empty() ? std::string("unknown") : status);
  }
  if (string_field(*outcome, "content").find(answer_marker) == std::string::npos) {
    return std::string("wrong_answer");
  }
  std::size_t reads = 0;
  bool read_ok = false;
  if (const auto* steps = outcome->if_contains("steps"); steps && steps->is_array()) {
    for (const auto& step : steps->as_array()) {
      if (!step.is_object()) {
        continue;
      }
      const auto& st = step.as_object();
      if (string_field(st, "kind") == "tool" && string_field(st, "name") == "read") {
        ++reads;
        read_ok = string_field(st, "status") == "success";
      }
    }
  }
  if (reads != 1) {
    return fmt::format("read_steps_{}", reads);
  }
  if (!read_ok) {
    return std::string("read_failed");
  }
  return std::nullopt;
}

struct agent_load_state {
  request_template base;
  std::vector<std::string> conversations;
  std::size_t next = 0;
  // The first run that did not count, with the start of troupe's answer (its error), for
  // the report: a count by kind alone does not say why.
  std::mutex failure_mutex;
  std::string first_failure;
};

asio::awaitable<std::optional<std::string>> agent_run(net::http_client& client, agent_load_state* s,
                                                      std::chrono::milliseconds timeout) {
  if (s->next >= s->conversations.size()) {
    co_return std::string("no_conversation_left");
  }
  request_template t = s->base;
  t.body = fmt::format(R"({{"conversation_id":{},"message":{}}})",
                       json_text(s->conversations[s->next++]), json_text(agent_task));
  std::string body;
  auto pending = send_request(client, &t, timeout, &body);
  auto failure = co_await std::move(pending);
  if (failure) {
    co_return failure;
  }
  auto verdict = check_agent_outcome(body);
  if (verdict) {
    const std::lock_guard lock(s->failure_mutex);
    if (s->first_failure.empty()) {
      constexpr std::size_t shown = 600;
      s->first_failure =
          fmt::format("{}: {}{}", *verdict, body.substr(0, shown), body.size() > shown ? "…" : "");
    }
  }
  co_return verdict;
}

// -- the mock's own time for one run's two model calls --

asio::awaitable<std::optional<std::string>> mock_pair(net::http_client& client,
                                                      const std::vector<request_template>* calls,
                                                      std::chrono::milliseconds timeout) {
  for (const auto& call : *calls) {
    auto pending = send_request(client, &call, timeout, nullptr);
    auto failure = co_await std::move(pending);
    if (failure) {
      co_return failure;
    }
  }
  co_return std::nullopt;
}

/// Times the two completion calls of one run (no tool result yet -> the `read` call;
/// with its result -> the answer) sent straight to the mock, one pair at a time.
latency_histogram measure_mock_time(const std::string& mock_origin, unsigned pairs) {
  const std::string tools =
      R"([{"type":"function","function":{"name":"read","description":"Read a file","parameters":{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}}}])";
  const std::string user = fmt::format(R"({{"role":"user","content":{}}})", json_text(agent_task));
  std::vector<request_template> calls(2);
  for (auto& c : calls) {
    c.url = mock_origin + "/v1/chat/completions";
    c.headers = {{"Content-Type", "application/json"}};
  }
  calls[0].body = fmt::format(R"({{"model":"mock-llm","stream":true,"messages":[{}],"tools":{}}})",
                              user, tools);
  calls[1].body = fmt::format(
      R"({{"model":"mock-llm","stream":true,"messages":[{},{{"role":"assistant","content":null,"tool_calls":[{{"id":"call_1","type":"function","function":{{"name":"read","arguments":"{{\"file_path\":\"input.txt\"}}"}}}}]}},{{"role":"tool","tool_call_id":"call_1","content":"{{\"ok\":true,\"content\":\"     1\\ttroupe agent benchmark fixture\"}}"}}],"tools":{}}})",
      user, tools);
  const auto* cp = &calls;
  workload_fn work = [cp](net::http_client& client, std::chrono::milliseconds timeout) {
    return mock_pair(client, cp, timeout);
  };
  load_options lo;
  lo.concurrency = 1;
  lo.max_requests = pairs;
  lo.duration = std::chrono::seconds(30);
  lo.warmup = std::chrono::milliseconds(200);
  return run_load(lo, work).latency;
}

/// Times one one-round completion call (streamed, as troupe and OpenClaw call their provider)
/// sent straight to the mock, one at a time.
latency_histogram measure_mock_one_round(const std::string& mock_origin, unsigned calls) {
  request_template call;
  call.url = mock_origin + "/v1/chat/completions";
  call.headers = {{"Content-Type", "application/json"}};
  call.body = fmt::format(
      R"({{"model":"mock-llm","stream":true,"messages":[{{"role":"user","content":{}}}]}})",
      json_text(one_round_message));
  const auto* cp = &call;
  workload_fn work = [cp](net::http_client& client, std::chrono::milliseconds timeout) {
    return send_request(client, cp, timeout, nullptr);
  };
  load_options lo;
  lo.concurrency = 1;
  lo.max_requests = calls;
  lo.duration = std::chrono::seconds(30);
  lo.warmup = std::chrono::milliseconds(200);
  return run_load(lo, work).latency;
}

// -- rows troupe persisted, read from its SQLite file --

struct row_counts {
  std::int64_t messages = 0;
  std::int64_t runs = 0;
  std::int64_t steps = 0;
};

expected<row_counts> count_rows(const std::filesystem::path& db_path) {
  sqlite3* db = nullptr;
  const auto uri = "file:" + db_path.string() + "?mode=ro";
  if (sqlite3_open_v2(uri.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr) !=
      SQLITE_OK) {
    const std::string message = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return fail(errc::io_error, fmt::format("cannot open {}: {}", db_path.string(), message));
  }
  sqlite3_busy_timeout(db, 2'000);
  sqlite3_stmt* stmt = nullptr;
  row_counts counts;
  const char* sql = "SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM runs), "
                    "(SELECT count(*) FROM execution_steps)";
  int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr);
  if (rc == SQLITE_OK) {
    rc = sqlite3_step(stmt);
  }
  if (rc == SQLITE_ROW) {
    counts.messages = sqlite3_column_int64(stmt, 0);
    counts.runs = sqlite3_column_int64(stmt, 1);
    counts.steps = sqlite3_column_int64(stmt, 2);
  }
  const std::string message = sqlite3_errmsg(db);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  if (rc != SQLITE_ROW) {
    return fail(errc::io_error, fmt::format("counting rows in {}: {}", db_path.string(), message));
  }
  return counts;
}

/// Counts the database's rows every `interval` on its own thread, for a rate over time.
class row_sampler {
public:
  row_sampler(std::filesystem::path db, std::chrono::milliseconds interval)
      : start_(clock_type::now()) {
    thread_ = std::thread([this, db = std::move(db), interval] {
      while (!stop_.load()) {
        if (auto c = count_rows(db); c) {
          const double t = std::chrono::duration<double>(clock_type::now() - start_).count();
          std::lock_guard lock(mutex_);
          samples_.emplace_back(t, *c);
        }
        std::this_thread::sleep_for(interval);
      }
    });
  }
  ~row_sampler() {
    stop();
  }
  row_sampler(const row_sampler&) = delete;
  row_sampler& operator=(const row_sampler&) = delete;

  void stop() {
    stop_.store(true);
    if (thread_.joinable()) {
      thread_.join();
    }
  }
  std::vector<std::pair<double, row_counts>> samples() {
    std::lock_guard lock(mutex_);
    return samples_;
  }

private:
  clock_type::time_point start_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<std::pair<double, row_counts>> samples_;
  std::thread thread_;
};

std::chrono::microseconds own_cpu() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return std::chrono::seconds(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         std::chrono::microseconds(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// -- one level of the agent load --

/// What one concurrency level measured.
struct agent_level {
  unsigned concurrency = 0;
  load_result load;
  double runs_per_s = 0;
  std::uint64_t rss_idle_kib = 0;
  std::uint64_t rss_peak_kib = 0;
  bool hwm_reset = false;
  double cpu_ms_per_run = 0;
  double bench_cpu_ms_per_run = 0;
  double mock_calls_per_run = 0;
  std::optional<row_counts> rows_before;
  std::optional<row_counts> rows_after;
  std::vector<std::pair<double, row_counts>> row_series;
  std::string started_at;
  std::vector<std::string> problems;
};

std::string utc_now() {
  const auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

/// Warms troupe up with `runs` of `work` one at a time; an error naming the first kind of
/// failure (and troupe's log) if any failed.
expected<void> warm_up(const scenario_options& o, troupe_server& troupe, const workload_fn& work,
                       unsigned runs, std::string_view what) {
  load_options warm;
  warm.concurrency = 1;
  warm.max_requests = runs;
  warm.duration = std::chrono::minutes(5);
  warm.timeout = std::max(o.timeout, std::chrono::milliseconds(30'000));
  const auto warmed = run_load(warm, work);
  if (warmed.failed > 0) {
    return fail(errc::unavailable,
                fmt::format("{} of {} {} failed (first kind: {})\n{}", warmed.failed, runs, what,
                            warmed.errors_by_kind.begin()->first, troupe.log_tail()));
  }
  return {};
}

/// The readings one level takes around its load: troupe's idle RSS and CPU, the mock's
/// calls and the bench's own CPU before; after, the figures per run and the peak RSS.
class level_meter {
public:
  level_meter(pid_t pid, local_mock& mock, agent_level& out) : pid_(pid), mock_(mock), out_(out) {
    if (pid_ > 0) {
      if (auto m = read_process_memory(pid_); m) {
        out_.rss_idle_kib = m->rss_kib;
      }
      out_.hwm_reset = reset_peak_memory(pid_);
      if (auto cpu = read_process_cpu(pid_); cpu) {
        cpu_before_ = *cpu;
      }
    }
  }

  /// Starts sampling RSS and the clocks: call just before the load.
  void start() {
    mock_before_ = mock_.stats().completion_requests;
    bench_cpu_before_ = own_cpu();
    if (pid_ > 0) {
      sampler_.emplace(pid_, 10ms);
    }
  }

  /// After the load (out.load set): runs/s, mock calls, the bench's and troupe's CPU per
  /// run and the peak RSS; the mock's completion requests during the load.
  std::uint64_t finish() {
    const auto bench_cpu = own_cpu() - bench_cpu_before_;
    const auto mock_calls = mock_.stats().completion_requests - mock_before_;
    const double runs_done = static_cast<double>(out_.load.succeeded + out_.load.failed);
    const double seconds = std::chrono::duration<double>(out_.load.elapsed).count();
    out_.runs_per_s = seconds > 0 ? static_cast<double>(out_.load.succeeded) / seconds : 0;
    out_.mock_calls_per_run = runs_done > 0 ? static_cast<double>(mock_calls) / runs_done : 0;
    out_.bench_cpu_ms_per_run =
        runs_done > 0 ? static_cast<double>(bench_cpu.count()) / 1e3 / runs_done : 0;
    if (pid_ > 0 && sampler_) {
      if (auto m = read_process_memory(pid_); m) {
        out_.rss_peak_kib = std::max(out_.hwm_reset ? m->hwm_kib : 0, sampler_->peak_kib());
      }
      if (auto cpu = read_process_cpu(pid_); cpu && cpu_before_ && runs_done > 0) {
        out_.cpu_ms_per_run = static_cast<double>((*cpu - *cpu_before_).count()) / 1e3 / runs_done;
      }
    }
    sampler_.reset();
    return mock_calls;
  }

private:
  pid_t pid_;
  local_mock& mock_;
  agent_level& out_;
  std::optional<std::chrono::microseconds> cpu_before_;
  std::uint64_t mock_before_ = 0;
  std::chrono::microseconds bench_cpu_before_{0};
  std::optional<memory_sampler> sampler_;
};

expected<agent_level> run_agent_level(const scenario_options& o, local_mock& mock,
                                      const std::string& mock_origin, unsigned concurrency,
                                      unsigned runs, bool count_storage, bench_report& report) {
  agent_level out;
  out.concurrency = concurrency;
  troupe_setup setup;
  setup.provider_base_url = mock_origin + "/v1";
  setup.agents = {{std::string(tool_agent_name), {"read"}, 4}};
  setup.settings = agent_settings;
  auto opened = open_troupe(o, setup);
  if (!opened) {
    return tl::unexpected(opened.error());
  }
  auto troupe = std::move(*opened);
  const std::string level = fmt::format("c{}", concurrency);
  report.targets[level + ".troupe"] = troupe->describe();
  if (troupe->data_dir().empty()) {
    return fail(errc::invalid_argument,
                "the agent scenario puts input.txt into each conversation's workspace: give "
                "--troupe-data-dir with --troupe");
  }
  const auto fixture = read_file(agent_fixture_path(o));
  if (fixture.empty()) {
    return fail(errc::not_found,
                fmt::format("cannot read the fixture {} (--agent-fixture)", agent_fixture_path(o)));
  }
  auto ids = create_conversations(*troupe, tool_agent_name, runs + warmup_runs, o);
  if (!ids) {
    return fail(ids.error().code, fmt::format("{}\n{}", ids.error().message, troupe->log_tail()));
  }
  if (auto seeded = seed_workspaces(troupe->data_dir(), *ids, fixture); !seeded) {
    return tl::unexpected(seeded.error());
  }
  // A fresh process for the measurement: the set-up's allocations (retained by the
  // allocator) must count neither as idle memory nor as room the load reuses.
  if (troupe->spawned()) {
    if (auto restarted = troupe->restart(); !restarted) {
      return tl::unexpected(restarted.error());
    }
    report.targets[level + ".troupe"] = troupe->describe();
  } else {
    report.notes.push_back("--troupe: the set-up conversations were created in the measured "
                           "process (a started troupe is restarted after the set-up)");
  }
  agent_load_state s;
  s.base = troupe_post(*troupe, "/api/v1/chat");
  s.conversations = std::move(*ids);
  auto* sp = &s;
  workload_fn work = [sp](net::http_client& client, std::chrono::milliseconds timeout) {
    return agent_run(client, sp, timeout);
  };
  if (auto warmed = warm_up(o, *troupe, work, warmup_runs, "warm-up runs"); !warmed) {
    return tl::unexpected(warmed.error());
  }
  s.first_failure.clear(); // the warm-up's do not count
  // Idle: after the warm-up, once the warm-up's journals and conversations have left
  // memory (agent_settings: 1 s).
  std::this_thread::sleep_for(2s);
  level_meter meter(troupe->pid(), mock, out);
  const auto db_path = troupe->data_dir() / "troupe.db";
  if (count_storage) {
    if (auto c = count_rows(db_path); c) {
      out.rows_before = *c;
    } else {
      out.problems.push_back(c.error().message);
    }
  }
  meter.start();
  std::optional<row_sampler> rows;
  if (count_storage) {
    rows.emplace(db_path, 250ms);
  }
  load_options lo;
  lo.concurrency = concurrency;
  lo.max_requests = runs;
  lo.duration = std::chrono::minutes(30);
  lo.timeout = std::max(o.timeout, std::chrono::milliseconds(120'000));
  lo.progress_label = o.progress ? fmt::format("agent c{}", concurrency) : "";
  out.started_at = utc_now();
  out.load = run_load(lo, work);
  if (rows) {
    rows->stop();
    out.row_series = rows->samples();
    if (auto c = count_rows(db_path); c) {
      out.rows_after = *c;
    } else {
      out.problems.push_back(c.error().message);
    }
  }
  if (!s.first_failure.empty()) {
    report.notes.push_back(
        fmt::format("{}: the first run that did not count: {}", level, s.first_failure));
  }
  const auto mock_calls = meter.finish();
  if (mock_calls != 2 * out.load.succeeded && out.load.failed == 0) {
    out.problems.push_back(
        fmt::format("mock-llm saw {} completion requests for {} runs (expected 2 "
                    "per run)",
                    mock_calls, out.load.succeeded));
  }
  if (const int status = troupe->stop(std::chrono::seconds(15)); status != 0) {
    out.problems.push_back(fmt::format("troupe exited with status {}", status));
  }
  return out;
}

/// Why a one-round answer of troupe's OpenAI-compatible route does not count, or nullopt.
std::optional<std::string> check_one_round_answer(std::string_view body) {
  auto answer = parse_object(body);
  if (!answer) {
    return std::string("bad_answer");
  }
  const auto* choices = answer->if_contains("choices");
  if (!choices || !choices->is_array() || choices->as_array().empty() ||
      !choices->as_array()[0].is_object()) {
    return std::string("no_choice");
  }
  const auto* message = choices->as_array()[0].as_object().if_contains("message");
  if (!message || !message->is_object() ||
      string_field(message->as_object(), "content").find(one_round_marker) == std::string::npos) {
    return std::string("wrong_answer");
  }
  return std::nullopt;
}

asio::awaitable<std::optional<std::string>> one_round_run(net::http_client& client,
                                                          const request_template* t,
                                                          std::chrono::milliseconds timeout) {
  std::string body;
  auto pending = send_request(client, t, timeout, &body);
  auto failure = co_await std::move(pending);
  if (failure) {
    co_return failure;
  }
  co_return check_one_round_answer(body);
}

/// One level of the one-round task on troupe: a fresh troupe with the tool-less agent, 20
/// unrecorded requests, then a closed loop of `concurrency` clients on its OpenAI-compatible
/// POST /v1/chat/completions (non-streamed, as the OpenClaw peer calls OpenClaw's).
expected<agent_level> run_one_round_level(const scenario_options& o, local_mock& mock,
                                          const std::string& mock_origin, unsigned concurrency,
                                          unsigned runs, bench_report& report) {
  agent_level out;
  out.concurrency = concurrency;
  troupe_setup setup;
  setup.provider_base_url = mock_origin + "/v1";
  setup.agents = {{std::string(chat_agent_name), {}, 4}};
  setup.settings = agent_settings;
  auto opened = open_troupe(o, setup);
  if (!opened) {
    return tl::unexpected(opened.error());
  }
  auto troupe = std::move(*opened);
  const std::string level = fmt::format("one_round.c{}", concurrency);
  report.targets[level + ".troupe"] = troupe->describe();
  request_template t = troupe_post(*troupe, "/v1/chat/completions");
  t.body = fmt::format(R"({{"model":{},"messages":[{{"role":"user","content":{}}}]}})",
                       json_text(chat_agent_name), json_text(one_round_message));
  const auto* tp = &t;
  workload_fn work = [tp](net::http_client& client, std::chrono::milliseconds timeout) {
    return one_round_run(client, tp, timeout);
  };
  if (auto warmed = warm_up(o, *troupe, work, warmup_runs, "one-round warm-up requests"); !warmed) {
    return tl::unexpected(warmed.error());
  }
  std::this_thread::sleep_for(2s); // as the agent levels: the warm-up's runs leave memory
  level_meter meter(troupe->pid(), mock, out);
  meter.start();
  load_options lo;
  lo.concurrency = concurrency;
  lo.max_requests = runs;
  lo.duration = std::chrono::minutes(30);
  lo.timeout = std::max(o.timeout, std::chrono::milliseconds(120'000));
  lo.progress_label = o.progress ? fmt::format("one-round c{}", concurrency) : "";
  out.started_at = utc_now();
  out.load = run_load(lo, work);
  const auto mock_calls = meter.finish();
  if (mock_calls != out.load.succeeded && out.load.failed == 0) {
    out.problems.push_back(fmt::format(
        "mock-llm saw {} completion requests for {} one-round runs (expected 1 per run)",
        mock_calls, out.load.succeeded));
  }
  if (const int status = troupe->stop(std::chrono::seconds(15)); status != 0) {
    out.problems.push_back(fmt::format("troupe exited with status {}", status));
  }
  return out;
}

double kib_to_mib(std::uint64_t kib) {
  return static_cast<double>(kib) / 1024.0;
}

double mem_per_run_kib(const agent_level& l) {
  return l.rss_peak_kib > l.rss_idle_kib
             ? static_cast<double>(l.rss_peak_kib - l.rss_idle_kib) / l.concurrency
             : 0.0;
}

/// troupe's figures of a level in the peers' result format (bench/peers/README.md).
json::object peer_format(const agent_level& l, const scenario_options& o,
                         std::string_view task = "agent") {
  const auto ms = [](std::uint64_t ns) { return std::round(static_cast<double>(ns) / 1e3) / 1e3; };
  json::object r;
  r["peer"] = "troupe";
  r["task"] = task;
  r["concurrency"] = l.concurrency;
  r["runs"] = l.load.succeeded + l.load.failed;
  r["errors"] = l.load.failed;
  r["runs_per_s"] = std::round(l.runs_per_s * 10) / 10;
  r["latency_ms"] = json::object{{"p50", ms(l.load.latency.percentile_ns(50))},
                                 {"p90", ms(l.load.latency.percentile_ns(90))},
                                 {"p99", ms(l.load.latency.percentile_ns(99))},
                                 {"max", ms(l.load.latency.max_ns())}};
  r["rss_idle_mb"] = std::round(kib_to_mib(l.rss_idle_kib) * 10) / 10;
  r["rss_peak_mb"] = std::round(kib_to_mib(l.rss_peak_kib) * 10) / 10;
  r["mem_per_concurrent_run_kb"] = std::round(mem_per_run_kib(l) * 10) / 10;
  r["duration_s"] = std::chrono::duration<double>(l.load.elapsed).count();
  r["cpu_ms_per_run"] = std::round(l.cpu_ms_per_run * 1000) / 1000;
  r["bench_cpu_ms_per_run"] = std::round(l.bench_cpu_ms_per_run * 1000) / 1000;
  r["mock_completion_requests_per_run"] = l.mock_calls_per_run;
  r["vmhwm_reset"] = l.hwm_reset;
  r["warmup_runs"] = warmup_runs;
  r["started_at"] = l.started_at;
  std::string command;
  for (const auto& a : o.command_line) {
    command += (command.empty() ? "" : " ") + a;
  }
  r["command"] = command;
  json::array problems;
  for (const auto& p : l.problems) {
    problems.emplace_back(p);
  }
  r["problems"] = std::move(problems);
  json::object kinds;
  for (const auto& [kind, n] : l.load.errors_by_kind) {
    kinds[kind] = n;
  }
  r["errors_by_kind"] = std::move(kinds);
  return r;
}

/// The peers' JSON results in `dir` (every *.json with a "peer" and a "concurrency").
std::vector<json::object> read_peer_results(const std::string& dir) {
  std::vector<json::object> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() != ".json") {
      continue;
    }
    auto r = parse_object(read_file(entry.path()));
    if (r && r->contains("peer") && r->contains("concurrency") &&
        string_field(*r, "peer") != "troupe") {
      out.push_back(std::move(*r));
    }
  }
  std::sort(out.begin(), out.end(), [](const json::object& a, const json::object& b) {
    return std::pair(string_field(a, "peer"), a.at("concurrency").to_number<double>()) <
           std::pair(string_field(b, "peer"), b.at("concurrency").to_number<double>());
  });
  return out;
}

double number_at(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && v->is_number() ? v->to_number<double>() : 0.0;
}

/// The task a peer result measured: "agent" (the 3-step tool task; results without the
/// field) or "one-round" (bench/peers/openclaw).
std::string task_of(const json::object& peer) {
  auto task = string_field(peer, "task");
  return task.empty() ? std::string("agent") : task;
}

/// The side-by-side table of one level and its ratio metrics.
void compare_with_peers(const agent_level& l, const std::vector<json::object>& peers,
                        bench_report& report) {
  std::string table =
      fmt::format("agent scenario at concurrency {}, side by side (ratios: troupe / peer)\n"
                  "  {:<16} {:>9} {:>9} {:>9} {:>9} {:>10} {:>11} {:>10} {:>11} {:>11}\n",
                  l.concurrency, "runtime", "runs/s", "p50 ms", "p99 ms", "RSS idle", "RSS peak",
                  "KiB/run", "CPU ms/run", "runs/s x", "KiB/run x");
  const auto p50 = static_cast<double>(l.load.latency.percentile_ns(50)) / 1e6;
  const auto p99 = static_cast<double>(l.load.latency.percentile_ns(99)) / 1e6;
  table +=
      fmt::format("  {:<16} {:>9.1f} {:>9.2f} {:>9.2f} {:>8.1f}M {:>9.1f}M {:>11.1f} {:>10.3f} "
                  "{:>11} {:>11}\n",
                  "troupe", l.runs_per_s, p50, p99, kib_to_mib(l.rss_idle_kib),
                  kib_to_mib(l.rss_peak_kib), mem_per_run_kib(l), l.cpu_ms_per_run, "", "");
  const std::string level = fmt::format("c{}", l.concurrency);
  bool any = false;
  for (const auto& peer : peers) {
    if (number_at(peer, "concurrency") != l.concurrency || task_of(peer) != "agent") {
      continue;
    }
    any = true;
    const auto name = string_field(peer, "peer");
    const auto& lat = peer.at("latency_ms").as_object();
    const double runs_per_s = number_at(peer, "runs_per_s");
    const double kib = number_at(peer, "mem_per_concurrent_run_kb");
    const double cpu = number_at(peer, "cpu_ms_per_run");
    const double runs_x = runs_per_s > 0 ? l.runs_per_s / runs_per_s : 0;
    const double mem_x = kib > 0 ? mem_per_run_kib(l) / kib : 0;
    table += fmt::format("  {:<16} {:>9.1f} {:>9.2f} {:>9.2f} {:>8.1f}M {:>9.1f}M {:>11.1f} "
                         "{:>10.3f} {:>10.1f}x {:>10.3f}x\n",
                         name, runs_per_s, number_at(lat, "p50"), number_at(lat, "p99"),
                         number_at(peer, "rss_idle_mb"), number_at(peer, "rss_peak_mb"), kib, cpu,
                         runs_x, mem_x);
    const auto prefix = fmt::format("{}.vs.{}", level, name);
    report.add(prefix + ".runs_per_s_ratio", runs_x);
    report.add(prefix + ".p99_ratio", number_at(lat, "p99") > 0 ? p99 / number_at(lat, "p99") : 0);
    report.add(prefix + ".mem_per_run_ratio", mem_x);
    report.add(prefix + ".cpu_per_run_ratio", cpu > 0 ? l.cpu_ms_per_run / cpu : 0);
    if (l.concurrency == 100 && name != "node-baseline" && runs_per_s > 0 && kib > 0) {
      report.notes.push_back(fmt::format(
          "target at concurrency 100 vs {}: runs/s >= 20x: {} ({:.1f}x); memory per concurrent "
          "run <= 1/20: {} ({:.3f}x)",
          name, runs_x >= 20 ? "met" : "MISSED", runs_x, mem_x <= 0.05 ? "met" : "MISSED", mem_x));
    }
  }
  if (any) {
    report.tables.push_back(std::move(table));
  }
}

/// The one-round table of one level: troupe's OpenAI-compatible route beside the peers that
/// ran the same task (OpenClaw's), with ratios troupe / peer.
void compare_one_round(const agent_level& l, const latency_histogram& mock_time,
                       const std::vector<json::object>& peers, bench_report& report) {
  const auto ms = [](std::uint64_t ns) { return static_cast<double>(ns) / 1e6; };
  const double p50 = ms(l.load.latency.percentile_ns(50));
  const double p99 = ms(l.load.latency.percentile_ns(99));
  const double beyond50 = p50 - ms(mock_time.percentile_ns(50));
  const double beyond99 = p99 - ms(mock_time.percentile_ns(99));
  std::string table = fmt::format(
      "one-round reply (OpenAI-compatible route) at concurrency {}, side by side (ratios: troupe "
      "/ peer)\n  {:<10} {:>8} {:>9} {:>9} {:>12} {:>12} {:>9} {:>9} {:>10} {:>9} {:>9} {:>9} "
      "{:>9}\n",
      l.concurrency, "runtime", "runs/s", "p50 ms", "p99 ms", "p50-mock ms", "p99-mock ms",
      "RSS idle", "RSS peak", "CPU ms/run", "runs/s x", "p50 x", "peak x", "CPU x");
  table +=
      fmt::format("  {:<10} {:>8.1f} {:>9.2f} {:>9.2f} {:>12.2f} {:>12.2f} {:>8.1f}M {:>8.1f}M "
                  "{:>10.3f}\n",
                  "troupe", l.runs_per_s, p50, p99, beyond50, beyond99, kib_to_mib(l.rss_idle_kib),
                  kib_to_mib(l.rss_peak_kib), l.cpu_ms_per_run);
  bool any = false;
  for (const auto& peer : peers) {
    if (number_at(peer, "concurrency") != l.concurrency || task_of(peer) != "one-round") {
      continue;
    }
    any = true;
    const auto name = string_field(peer, "peer");
    const auto* lat_value = peer.if_contains("latency_ms");
    const json::object empty;
    const auto& lat = lat_value && lat_value->is_object() ? lat_value->as_object() : empty;
    const auto* beyond_value = peer.if_contains("beyond_mock_ms");
    const auto& beyond =
        beyond_value && beyond_value->is_object() ? beyond_value->as_object() : empty;
    const double runs_per_s = number_at(peer, "runs_per_s");
    const double peer_p50 = number_at(lat, "p50");
    const double peak = number_at(peer, "rss_peak_mb");
    const double cpu = number_at(peer, "cpu_ms_per_run");
    const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    const double runs_x = ratio(l.runs_per_s, runs_per_s);
    const double p50_x = ratio(p50, peer_p50);
    const double peak_x = ratio(kib_to_mib(l.rss_peak_kib), peak);
    const double cpu_x = ratio(l.cpu_ms_per_run, cpu);
    table += fmt::format("  {:<10} {:>8.2f} {:>9.2f} {:>9.2f} {:>12.2f} {:>12.2f} {:>8.1f}M "
                         "{:>8.1f}M {:>10.3f} {:>8.1f}x {:>8.4f}x {:>8.4f}x {:>8.4f}x\n",
                         name, runs_per_s, peer_p50, number_at(lat, "p99"),
                         number_at(beyond, "p50"), number_at(beyond, "p99"),
                         number_at(peer, "rss_idle_mb"), peak, cpu, runs_x, p50_x, peak_x, cpu_x);
    const auto prefix = fmt::format("one_round.c{}.vs.{}", l.concurrency, name);
    report.add(prefix + ".runs_per_s_ratio", runs_x);
    report.add(prefix + ".p50_ratio", p50_x);
    report.add(prefix + ".p99_ratio", ratio(p99, number_at(lat, "p99")));
    report.add(prefix + ".rss_peak_ratio", peak_x);
    report.add(prefix + ".cpu_per_run_ratio", cpu_x);
  }
  if (any) {
    report.tables.push_back(std::move(table));
  }
}

void add_level_metrics(const agent_level& l, const latency_histogram& mock_time,
                       bench_report& report, std::string_view prefix = "") {
  const std::string p = fmt::format("{}c{}", prefix, l.concurrency);
  report.add(p + ".runs", static_cast<double>(l.load.succeeded + l.load.failed));
  report.add(p + ".runs_per_s", l.runs_per_s);
  report.add_latency(p + ".latency", l.load.latency);
  const auto beyond = [&](double pct) {
    return us(l.load.latency.percentile_ns(pct)) - us(mock_time.percentile_ns(pct));
  };
  report.add(p + ".beyond_mock.p50_us", beyond(50));
  report.add(p + ".beyond_mock.p99_us", beyond(99));
  report.add(p + ".rss_idle_kib", static_cast<double>(l.rss_idle_kib));
  report.add(p + ".rss_peak_kib", static_cast<double>(l.rss_peak_kib));
  report.add(p + ".mem_per_concurrent_run_kib", mem_per_run_kib(l));
  report.add(p + ".cpu_ms_per_run", l.cpu_ms_per_run);
  report.add(p + ".bench_cpu_ms_per_run", l.bench_cpu_ms_per_run);
  report.add(p + ".mock_calls_per_run", l.mock_calls_per_run);
  report.add(p + ".errors", static_cast<double>(l.load.failed));
  for (const auto& [kind, n] : l.load.errors_by_kind) {
    report.add(p + ".errors." + kind, static_cast<double>(n));
  }
  for (const auto& problem : l.problems) {
    report.notes.push_back(fmt::format("{}: PROBLEM: {}", p, problem));
  }
}

unsigned default_runs(unsigned concurrency) {
  switch (concurrency) {
    case 1:
      return 200;
    case 100:
      return 2'000;
    case 1'000:
      return 5'000;
    default:
      return std::max(20u * concurrency, 100u);
  }
}

/// Starts the scenario's mock-llm and times its own answer to one run's two calls.
struct chat_mock {
  std::unique_ptr<local_mock> mock;
  std::string origin;
  latency_histogram own_time;
};

expected<chat_mock> start_chat_mock(const scenario_options& o, bool agent_script,
                                    bench_report& report) {
  auto options = chat_mock_options(o, agent_script);
  if (!options) {
    return tl::unexpected(options.error());
  }
  chat_mock m;
  m.mock = std::make_unique<local_mock>(std::move(*options));
  auto started = m.mock->start();
  if (!started) {
    return tl::unexpected(started.error());
  }
  m.origin = *started;
  report.targets["mock"] = m.origin + "/v1";
  report.targets["mock_kind"] = fmt::format(
      "mock-llm in-process on 127.0.0.1:0 with the script {} (after two bench rules: set-up "
      "and idle messages)",
      agent_script ? agent_script_path(o) : std::string("(none)"));
  if (agent_script) {
    m.own_time = measure_mock_time(m.origin, 200);
    report.add_latency("mock_own_time", m.own_time);
  }
  return m;
}

} // namespace

expected<void> run_agent(const scenario_options& o, bench_report& report) {
  auto mock = start_chat_mock(o, true, report);
  if (!mock) {
    return tl::unexpected(mock.error());
  }
  std::vector<unsigned> levels = {1, 100, 1'000};
  if (o.concurrency > 0) {
    levels = {o.concurrency};
  }
  std::vector<json::object> peers;
  if (!o.peers_dir.empty()) {
    peers = read_peer_results(o.peers_dir);
    if (peers.empty()) {
      report.notes.push_back(fmt::format("--peers {}: no peer results found", o.peers_dir));
    }
    json::array raw;
    for (const auto& p : peers) {
      raw.emplace_back(p);
    }
    report.extra["peers"] = std::move(raw);
    report.targets["peers"] = o.peers_dir;
  }
  if (o.task != "agent" && o.task != "one-round" && o.task != "all") {
    return fail(errc::invalid_argument, fmt::format("--task {}: agent, one-round or all", o.task));
  }
  // The one-round levels: the peers' one-round concurrencies (OpenClaw's), else 1 and 8.
  std::vector<unsigned> one_round_levels;
  for (const auto& p : peers) {
    const auto c = static_cast<unsigned>(number_at(p, "concurrency"));
    if (task_of(p) == "one-round" && c > 0 &&
        std::find(one_round_levels.begin(), one_round_levels.end(), c) == one_round_levels.end()) {
      one_round_levels.push_back(c);
    }
  }
  std::sort(one_round_levels.begin(), one_round_levels.end());
  if (o.task == "agent" && one_round_levels.empty()) {
    // no one-round peers: the agent task only
  } else if (o.concurrency > 0 && o.task == "one-round") {
    one_round_levels = {o.concurrency};
  } else if (one_round_levels.empty()) {
    one_round_levels = {1, 8};
  }
  if (o.task == "one-round") {
    levels.clear();
  }
  for (const unsigned c : levels) {
    const unsigned runs = o.runs ? o.runs : default_runs(c);
    auto level = run_agent_level(o, *mock->mock, mock->origin, c, runs, false, report);
    if (!level) {
      return tl::unexpected(level.error());
    }
    add_level_metrics(*level, mock->own_time, report);
    auto row = peer_format(*level, o);
    report.steps.push_back(row);
    if (!o.peers_out.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(o.peers_out, ec);
      const auto path = std::filesystem::path(o.peers_out) / fmt::format("troupe-c{}.json", c);
      std::ofstream file(path, std::ios::binary | std::ios::trunc);
      file << json::serialize(row) << "\n";
      if (!file) {
        return fail(errc::io_error, fmt::format("cannot write {}", path.string()));
      }
    }
    if (!peers.empty()) {
      compare_with_peers(*level, peers, report);
    }
  }
  if (!one_round_levels.empty()) {
    const auto own = measure_mock_one_round(mock->origin, 200);
    report.add_latency("one_round.mock_own_time", own);
    for (const unsigned c : one_round_levels) {
      const unsigned runs = o.runs ? o.runs : std::max(200u, 50u * c);
      auto level = run_one_round_level(o, *mock->mock, mock->origin, c, runs, report);
      if (!level) {
        return tl::unexpected(level.error());
      }
      add_level_metrics(*level, own, report, "one_round.");
      auto row = peer_format(*level, o, "one-round");
      report.steps.push_back(row);
      if (!o.peers_out.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(o.peers_out, ec);
        const auto path =
            std::filesystem::path(o.peers_out) / fmt::format("troupe-one-round-c{}.json", c);
        std::ofstream file(path, std::ios::binary | std::ios::trunc);
        file << json::serialize(row) << "\n";
        if (!file) {
          return fail(errc::io_error, fmt::format("cannot write {}", path.string()));
        }
      }
      compare_one_round(*level, own, peers, report);
    }
    report.notes.push_back(
        "one-round task (the OpenClaw peer's, bench/peers/openclaw): POST /v1/chat/completions "
        "on troupe's OpenAI-compatible route, model bench-chat (no tools), non-streamed, the "
        "message \"[bench one-round] Say hello in one sentence.\" that mock-llm answers in one "
        "round; verified per request (the mock's text in choices[0].message.content) and 1 mock "
        "call per request; 20 unrecorded warm-up requests on a fresh troupe per level. "
        "one_round.mock_own_time = that call sent straight to the mock; p50-mock = latency minus "
        "it. troupe is one process; OpenClaw's RSS and CPU are summed over its gateway and "
        "helper processes");
  }
  if (levels.empty()) {
    return {};
  }
  report.notes.push_back(
      "each run: POST /api/v1/chat (blocking) continuing a conversation created beforehand with "
      "one set-up exchange (a one-round text answer), because troupe creates a conversation's "
      "workspace (<data-dir>/workspaces/<id>) with the conversation and has no route to put a "
      "file there first; the bench writes the peers' input.txt into each workspace, restarts "
      "troupe, runs 20 unrecorded warm-up runs, then the measured closed loop. The run itself is "
      "the peers' task: LLM -> read {\"file_path\":\"input.txt\"} -> LLM -> answer; its model "
      "requests carry the two set-up messages as history");
  report.notes.push_back(
      "verified per run: status succeeded, the mock's scripted answer, exactly one read step "
      "that succeeded; anything else counts as an error (errors.<kind>)");
  report.notes.push_back(
      "beyond_mock = run latency percentile minus the same percentile of mock_own_time (the "
      "run's two model calls sent straight to the mock, one pair at a time); memory: VmRSS "
      "idle after the warm-up, peak = max(VmHWM reset before the load, VmRSS sampled every 10 "
      "ms); per concurrent run = (peak - idle) / concurrency; CPU = troupe's utime+stime / "
      "runs; bench_cpu = this process (load generator and mock-llm) / runs");
  report.notes.push_back(
      o.troupe_url.empty()
          ? "troupe started with api.run_retention_ms=1000 and actors.conversation_idle_ms=1000 "
            "so that finished runs leave memory within a second (defaults: 15 and 10 minutes, "
            "for replay); override with --troupe-set"
          : "--troupe: the server's own api.run_retention_ms and actors.conversation_idle_ms "
            "apply; finished runs stay in memory that long and count in the peak");
  return {};
}

expected<void> run_storage(const scenario_options& o, bench_report& report) {
  auto mock = start_chat_mock(o, true, report);
  if (!mock) {
    return tl::unexpected(mock.error());
  }
  const unsigned c = o.concurrency ? o.concurrency : 100;
  const unsigned runs = o.runs ? o.runs : default_runs(c);
  auto level = run_agent_level(o, *mock->mock, mock->origin, c, runs, true, report);
  if (!level) {
    return tl::unexpected(level.error());
  }
  add_level_metrics(*level, mock->own_time, report);
  report.steps.push_back(peer_format(*level, o));
  const double seconds = std::chrono::duration<double>(level->load.elapsed).count();
  if (level->rows_before && level->rows_after && seconds > 0) {
    const auto& a = *level->rows_before;
    const auto& b = *level->rows_after;
    const auto messages = static_cast<double>(b.messages - a.messages);
    const auto runs_rows = static_cast<double>(b.runs - a.runs);
    const auto steps = static_cast<double>(b.steps - a.steps);
    const auto ok = static_cast<double>(level->load.succeeded);
    report.add("persisted.messages", messages);
    report.add("persisted.runs", runs_rows);
    report.add("persisted.steps", steps);
    report.add("persisted.messages_per_s", messages / seconds);
    report.add("persisted.rows_per_s", (messages + runs_rows + steps) / seconds);
    report.add("persisted.messages_per_run", ok > 0 ? messages / ok : 0);
    report.add("persisted.steps_per_run", ok > 0 ? steps / ok : 0);
    // The best one-second window of the samples.
    double best = 0;
    const auto& series = level->row_series;
    for (std::size_t i = 0, j = 0; i < series.size(); ++i) {
      while (j < series.size() && series[j].first - series[i].first < 1.0) {
        ++j;
      }
      if (j < series.size()) {
        const double dt = series[j].first - series[i].first;
        best = std::max(
            best, static_cast<double>(series[j].second.messages - series[i].second.messages) / dt);
      }
    }
    if (best > 0) { // a load shorter than a second has no full window
      report.add("persisted.messages_per_s_best_1s", best);
    }
    json::array points;
    for (const auto& [t, counts] : series) {
      points.push_back(json::array{t, counts.messages - a.messages, counts.runs - a.runs,
                                   counts.steps - a.steps});
    }
    report.extra["persisted_series"] = std::move(points);
  }
  report.notes.push_back(
      "persisted.* = rows added to troupe's SQLite file (messages, runs, execution_steps) during "
      "the measured load, counted from outside with read-only queries (every 250 ms for the "
      "series, and before/after); a run's answer comes after its final status is committed, so "
      "every answered run's rows are counted");
  report.notes.push_back(
      "commit latency p99: troupe exposes no commit-latency metric (the store_writer keeps "
      "counters only), so it is not reported here; from outside it is bounded above by the run "
      "latency (each blocking answer waits for the run's last commit, after a group-commit "
      "window of storage.group_commit_ms); the in-process figure is the store_writer benchmark "
      "in docs/benchmarks.md (Storage, issue 4)");
  return {};
}

// -- idle --

namespace {

struct subscriber_state {
  std::atomic<std::size_t> ready{0};
  std::atomic<std::size_t> failed{0};
  std::atomic<std::size_t> ended{0};
};

asio::awaitable<void> hold_subscription(net::http_client* client, request_template t,
                                        subscriber_state* s) {
  auto request = make_request(t, std::chrono::milliseconds(60'000));
  request.deadlines.idle = std::chrono::milliseconds(0);
  request.deadlines.total = std::chrono::milliseconds(0);
  auto opening = client->open(std::move(request));
  auto opened = co_await std::move(opening);
  if (!opened || opened->status() != 200) {
    ++s->failed;
    co_return;
  }
  net::sse_parser parser;
  std::string bytes;
  bool counted = false;
  for (;;) {
    bytes.clear();
    auto reading = opened->read(bytes);
    auto more = co_await std::move(reading);
    if (!more || !*more) {
      ++(counted ? s->ended : s->failed);
      co_return;
    }
    auto fed = parser.feed(bytes, [&](const net::sse_message& m) {
      if (!counted && !m.data.empty()) {
        counted = true;
        ++s->ready;
      }
    });
    if (!fed) {
      ++(counted ? s->ended : s->failed);
      co_return;
    }
  }
}

struct run_start_state {
  request_template request;
  std::vector<std::string> conversations;
  std::size_t next = 0;
  std::vector<std::string> run_ids;
};

asio::awaitable<std::optional<std::string>>
start_waiting_run(net::http_client& client, run_start_state* s, std::chrono::milliseconds timeout) {
  if (s->next >= s->conversations.size()) {
    co_return std::string("no_conversation_left");
  }
  request_template t = s->request;
  t.body = fmt::format(R"({{"conversation_id":{},"message":{}}})",
                       json_text(s->conversations[s->next++]), json_text(idle_message));
  std::string body;
  auto pending = send_request(client, &t, timeout, &body);
  auto failure = co_await std::move(pending);
  if (failure) {
    co_return failure;
  }
  auto answer = parse_object(body);
  if (!answer || string_field(*answer, "run_id").empty()) {
    co_return std::string("no_run_id");
  }
  s->run_ids.push_back(string_field(*answer, "run_id"));
  co_return std::nullopt;
}

struct memory_point {
  std::string phase;
  std::size_t count = 0;
  std::uint64_t rss_kib = 0;
  /// Sockets troupe itself holds open.
  std::uint64_t process_sockets = 0;
  socket_stats sockets;
};

expected<memory_point> measure_point(pid_t pid, std::string phase, std::size_t count) {
  // Let the process settle (pending frees, the last answers' buffers) before reading.
  std::this_thread::sleep_for(1s);
  memory_point p;
  p.phase = std::move(phase);
  p.count = count;
  auto m = read_process_memory(pid);
  if (!m) {
    return tl::unexpected(m.error());
  }
  p.rss_kib = m->rss_kib;
  auto own = count_process_sockets(pid);
  if (!own) {
    return tl::unexpected(own.error());
  }
  p.process_sockets = *own;
  if (auto s = read_socket_stats(); s) {
    p.sockets = *s;
  }
  return p;
}

/// Waits until `done()` holds or `limit` passes; false on timeout.
template <class Done> bool wait_until(Done done, std::chrono::milliseconds limit) {
  const auto deadline = clock_type::now() + limit;
  while (!done()) {
    if (clock_type::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

} // namespace

expected<void> run_idle(const scenario_options& o, bench_report& report) {
  auto mock = start_chat_mock(o, false, report);
  if (!mock) {
    return tl::unexpected(mock.error());
  }
  const std::size_t n = o.conversations ? o.conversations : 1'000;
  troupe_setup setup;
  setup.provider_base_url = mock->origin + "/v1";
  setup.agents = {{std::string(chat_agent_name), {}, 4}};
  auto opened = open_troupe(o, setup);
  if (!opened) {
    return tl::unexpected(opened.error());
  }
  auto troupe = std::move(*opened);
  report.targets["troupe"] = troupe->describe();
  const pid_t pid = troupe->pid();
  if (pid <= 0) {
    return fail(
        errc::invalid_argument,
        "the idle scenario reads troupe's memory from /proc: give --troupe-pid with --troupe");
  }
  // Warm-up: a few conversations, so that first-use allocations are not charged to N.
  if (auto warm = create_conversations(*troupe, chat_agent_name, warmup_runs, o); !warm) {
    return fail(warm.error().code, fmt::format("{}\n{}", warm.error().message, troupe->log_tail()));
  }
  std::vector<memory_point> points;
  auto base = measure_point(pid, "start", 0);
  if (!base) {
    return tl::unexpected(base.error());
  }
  points.push_back(*base);

  // A: N conversations, each with one finished exchange, in memory and idle.
  auto ids = create_conversations(*troupe, chat_agent_name, n, o);
  if (!ids) {
    return fail(ids.error().code, fmt::format("{}\n{}", ids.error().message, troupe->log_tail()));
  }
  auto after_conversations = measure_point(pid, "conversations", n);
  if (!after_conversations) {
    return tl::unexpected(after_conversations.error());
  }
  points.push_back(*after_conversations);

  // B: a durable run in each, waiting on the model (the mock answers an hour later).
  run_start_state runs;
  runs.request = troupe_post(*troupe, "/api/v1/runs");
  runs.conversations = *ids;
  auto* rp = &runs;
  workload_fn start_work = [rp](net::http_client& client, std::chrono::milliseconds timeout) {
    return start_waiting_run(client, rp, timeout);
  };
  load_options lo;
  lo.concurrency = static_cast<unsigned>(std::min<std::size_t>(n, 16));
  lo.max_requests = n;
  lo.duration = std::chrono::minutes(30);
  lo.timeout = std::max(o.timeout, std::chrono::milliseconds(30'000));
  lo.progress_label = o.progress ? "idle: runs" : "";
  const auto started = run_load(lo, start_work);
  if (started.failed > 0) {
    return fail(errc::unavailable, fmt::format("{} of {} runs did not start ({})", started.failed,
                                               n, started.errors_by_kind.begin()->first));
  }
  if (!wait_until([&] { return mock->mock->stats().active_streams >= n; }, 60s)) {
    return fail(errc::timeout, fmt::format("only {} of {} runs reached the model within 60 s",
                                           mock->mock->stats().active_streams, n));
  }
  auto after_runs = measure_point(pid, "waiting runs", n);
  if (!after_runs) {
    return tl::unexpected(after_runs.error());
  }
  points.push_back(*after_runs);

  // C: an SSE subscriber on each run (GET /api/v1/runs/{id}/events), held open.
  subscriber_state subs;
  {
    asio::io_context io(1);
    net::http_client_options client_options;
    client_options.max_cached_connections = 16;
    net::http_client client(io.get_executor(), client_options);
    auto work_guard = asio::make_work_guard(io);
    std::vector<std::unique_ptr<asio::cancellation_signal>> signals;
    for (const auto& run_id : runs.run_ids) {
      request_template t;
      t.method = net::http_method::get;
      t.url = fmt::format("{}/api/v1/runs/{}/events", troupe->origin(), run_id);
      t.headers = {troupe->authorization(), {"Accept", "text/event-stream"}};
      signals.push_back(std::make_unique<asio::cancellation_signal>());
      asio::co_spawn(io, hold_subscription(&client, std::move(t), &subs),
                     asio::bind_cancellation_slot(signals.back()->slot(), asio::detached));
    }
    std::thread runner([&io] { io.run(); });
    const bool all_ready = wait_until(
        [&] { return subs.ready.load() + subs.failed.load() >= runs.run_ids.size(); }, 120s);
    std::optional<memory_point> after_subs;
    std::optional<error> measure_error;
    if (all_ready && subs.failed.load() == 0) {
      if (auto p = measure_point(pid, "subscribers", subs.ready.load()); p) {
        after_subs = *p;
      } else {
        measure_error = p.error();
      }
    }
    // Close every subscriber from the io thread, then let the io context run dry.
    asio::post(io, [&signals, &work_guard] {
      for (auto& s : signals) {
        s->emit(asio::cancellation_type::terminal);
      }
      work_guard.reset();
    });
    runner.join();
    if (!all_ready || subs.failed.load() > 0) {
      return fail(errc::unavailable,
                  fmt::format("subscribers: {} ready, {} failed of {}", subs.ready.load(),
                              subs.failed.load(), runs.run_ids.size()));
    }
    if (measure_error) {
      return tl::unexpected(*measure_error);
    }
    points.push_back(*after_subs);
  }
  const int status = troupe->stop(std::chrono::seconds(15));
  if (status != 0) {
    report.notes.push_back(fmt::format("troupe exited with status {} at the end", status));
  }

  const auto per = [&](std::size_t from, std::size_t to) {
    return (static_cast<double>(points[to].rss_kib) - static_cast<double>(points[from].rss_kib)) /
           static_cast<double>(n);
  };
  const auto sock_per = [&](std::size_t from, std::size_t to) {
    return (static_cast<double>(points[to].sockets.tcp_mem_kib()) -
            static_cast<double>(points[from].sockets.tcp_mem_kib())) /
           static_cast<double>(n);
  };
  report.add("conversations", static_cast<double>(n));
  report.add("kib_per_conversation", per(0, 1));
  report.add("kib_per_waiting_run", per(1, 2));
  report.add("kib_per_subscriber", per(2, 3));
  report.add("kib_per_conversation_with_subscriber", per(0, 3));
  report.add("kernel.tcp_kib_per_subscriber", sock_per(2, 3));
  report.add("kernel.tcp_kib_per_waiting_run", sock_per(1, 2));
  report.add("sockets_per_subscriber", (static_cast<double>(points[3].process_sockets) -
                                        static_cast<double>(points[2].process_sockets)) /
                                           static_cast<double>(n));
  report.add("kernel.tcp_sockets_per_subscriber",
             (static_cast<double>(points[3].sockets.tcp_inuse) -
              static_cast<double>(points[2].sockets.tcp_inuse)) /
                 static_cast<double>(n));
  json::array rows;
  for (const auto& p : points) {
    report.add(fmt::format("rss_kib.{}", p.phase == "waiting runs" ? "waiting_runs" : p.phase),
               static_cast<double>(p.rss_kib));
    json::object row;
    row["phase"] = p.phase;
    row["count"] = p.count;
    row["rss_kib"] = p.rss_kib;
    row["process_sockets"] = p.process_sockets;
    row["tcp_inuse"] = p.sockets.tcp_inuse;
    row["tcp_mem_kib"] = p.sockets.tcp_mem_kib();
    row["sockets_used"] = p.sockets.sockets_used;
    rows.push_back(std::move(row));
  }
  report.steps = std::move(rows);
  report.notes.push_back(
      "troupe has no conversation-level event subscription: a subscriber follows a run "
      "(GET /api/v1/runs/{id}/events). So the figure is built in three measured steps, each "
      "the change of troupe's VmRSS (after 1 s to settle) divided by N: N conversations with "
      "one finished exchange each, left in memory (kib_per_conversation); a durable run in "
      "each waiting on the model, whose answer is an hour away (kib_per_waiting_run, includes "
      "the provider connection); an SSE subscriber on each run (kib_per_subscriber). "
      "kib_per_conversation_with_subscriber is the sum: an idle conversation as a chat UI holds "
      "it, except that troupe keeps a run open to have something to follow");
  report.notes.push_back(
      "kernel.* = change of TCP buffer memory (/proc/net/sockstat, whole machine: both ends of "
      "every loopback connection, the bench's included) per item; not part of any RSS. "
      "sockets_per_subscriber = change of the sockets troupe itself holds open, per subscriber");
  return {};
}

} // namespace troupe::bench::detail
