// `troupe bench`: run a load scenario against loopback targets and report it (table on
// stdout, JSON and a PNG chart with --out), or compare two reports.

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.hpp"
#include "troupe/bench/report.hpp"
#include "troupe/bench/scenarios.hpp"
#include "troupe/bench/sweep.hpp"

namespace troupe::app {

namespace {

struct bench_cli {
  bench::scenario_options options;
  double duration_s = 5;
  unsigned timeout_ms = 5'000;
  double p99_bound_ms = 1;
  std::string out;
  std::vector<std::string> compare;
  std::vector<std::string> sweep;
  bool quiet = false;
  bool no_chart = false;
};

// The exact argv of this process, for the report (main does not pass argv on).
std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  for (std::string arg; std::getline(in, arg, '\0');) {
    args.push_back(arg);
  }
  return args;
}

// `--sweep`: the scenario once per value (or point of the cartesian product), a table, the
// best point and one JSON with every point.
int run_bench_sweep(const bench_cli& cli) {
  std::vector<bench::sweep_axis> axes;
  for (const auto& text : cli.sweep) {
    auto axis = bench::parse_sweep(text);
    if (!axis) {
      fmt::print(stderr, "troupe bench: {}\n", axis.error().message);
      return 2;
    }
    axes.push_back(std::move(*axis));
  }
  if (!cli.compare.empty()) {
    fmt::print(stderr, "troupe bench: --sweep and --compare do not go together\n");
    return 2;
  }
  const bool progress = !cli.quiet;
  auto result = bench::run_sweep(cli.options, axes, [progress](const auto& point, auto i, auto n) {
    if (progress) {
      fmt::print(stderr, "[sweep] point {}/{} ({}): {}\n", i + 1, n, point.describe(),
                 point.report ? "done" : "failed: " + point.error);
    }
  });
  if (!result) {
    fmt::print(stderr, "troupe bench: {}\n", result.error().message);
    return 2;
  }
  fmt::print("{}", bench::format_sweep_table(*result));
  if (!cli.out.empty()) {
    std::ofstream file(cli.out, std::ios::binary | std::ios::trunc);
    file << bench::sweep_to_json(*result);
    if (!file) {
      fmt::print(stderr, "troupe bench: cannot write {}\n", cli.out);
      return 1;
    }
    fmt::print("report: {}\n", cli.out);
  }
  std::fflush(stdout);
  const bool all_ran = std::all_of(result->points.begin(), result->points.end(),
                                   [](const auto& p) { return p.report.has_value(); });
  return all_ran ? 0 : 3;
}

int run_bench(bench_cli cli) {
  auto& o = cli.options;
  o.duration = std::chrono::milliseconds(static_cast<long>(cli.duration_s * 1000));
  o.timeout = std::chrono::milliseconds(cli.timeout_ms);
  o.p99_bound = std::chrono::microseconds(static_cast<long>(cli.p99_bound_ms * 1000));
  o.progress = !cli.quiet;
  if (!cli.sweep.empty()) {
    return run_bench_sweep(cli);
  }
  if (!cli.compare.empty()) {
    auto text = bench::compare_reports(cli.compare[0], cli.compare[1]);
    if (!text) {
      fmt::print(stderr, "troupe bench: {}\n", text.error().message);
      return 2;
    }
    fmt::print("{}", *text);
    return 0;
  }
  auto report = bench::run_scenario(o);
  if (!report) {
    fmt::print(stderr, "troupe bench: {}\n", report.error().message);
    return report.error().code == errc::unavailable ? 3 : 2;
  }
  fmt::print("{}", bench::format_table(*report));
  if (!cli.out.empty()) {
    {
      std::ofstream file(cli.out, std::ios::binary | std::ios::trunc);
      file << bench::to_json(*report);
      if (!file) {
        fmt::print(stderr, "troupe bench: cannot write {}\n", cli.out);
        return 1;
      }
    }
    fmt::print("report: {}\n", cli.out);
    if (!cli.no_chart) {
      auto png = cli.out;
      if (png.size() > 5 && png.ends_with(".json")) {
        png.resize(png.size() - 5);
      }
      png += ".png";
      if (auto charted = bench::write_chart(cli.out, png); charted) {
        fmt::print("chart:  {}\n", png);
      } else {
        fmt::print(stderr, "troupe bench: no chart: {}\n", charted.error().message);
      }
    }
  }
  std::fflush(stdout);
  return 0;
}

} // namespace

void add_bench_command(CLI::App& cli, command_action& action) {
  auto opts = std::make_shared<bench_cli>();
  auto* cmd = cli.add_subcommand(
      "bench", "Run a load scenario against loopback targets and report latency and throughput");
  cmd->add_option("--scenario", opts->options.scenario,
                  fmt::format("{}", fmt::join(bench::scenario_names(), " | ")))
      ->capture_default_str();
  cmd->add_option("--target", opts->options.target,
                  "loopback URL of a mock-llm / OpenAI-compatible server (default: start a "
                  "mock-llm in-process on 127.0.0.1:0)");
  cmd->add_option("--via", opts->options.via,
                  "the path under test: 'troupe' (troupe's OpenAI-compatible route, a troupe "
                  "started here unless --troupe) or a loopback URL; overhead and stream compare "
                  "it with --target, throughput loads it instead");
  cmd->add_option("--troupe", opts->options.troupe_url,
                  "loopback URL of a running troupe to use instead of starting one (needs "
                  "--token; the bench creates its provider and agents through the admin API)");
  cmd->add_option("--token", opts->options.troupe_token, "an admin token of --troupe");
  cmd->add_option("--troupe-pid", opts->options.troupe_pid,
                  "pid of --troupe, for memory and CPU readings from /proc");
  cmd->add_option("--troupe-data-dir", opts->options.troupe_data_dir,
                  "data directory of --troupe (agent, storage: workspaces and database)");
  cmd->add_option("--troupe-set", opts->options.troupe_settings,
                  "KEY=VALUE setting for the troupe started here (dotted key, TOML value), "
                  "e.g. server.io_threads=2; repeatable");
  cmd->add_option("--sweep", opts->sweep,
                  "KEY=V1,V2,...: run the scenario once per value of a troupe setting (TOML "
                  "values as for --troupe-set; a plain word for a string key), each against a "
                  "fresh troupe, and print a table and the best value; several --sweep run "
                  "their cartesian product (docs/tuning.md)");
  cmd->add_flag("--keep-troupe-dir", opts->options.keep_troupe_dir,
                "keep the started troupe's temporary directory (config, data, log)");
  cmd->add_option("--runs", opts->options.runs,
                  "agent, storage: measured runs per level (default 200 / 2000 / 5000 at "
                  "concurrency 1 / 100 / 1000, as the peers); channel: messages per thread "
                  "(default 5)");
  cmd->add_option("--conversations", opts->options.conversations,
                  "idle: conversations, each with a waiting run and a subscriber (default 1000); "
                  "channel: threads of the channel (default 1000)");
  cmd->add_option("--channel-type", opts->options.channel_type,
                  "channel: the platform driven: webhook (default), telegram, slack, wecom, "
                  "wechat_mp, whatsapp, feishu or dingtalk (deliveries signed or encrypted as "
                  "the platform makes them; replies at a fake of the platform)");
  cmd->add_option("--peers", opts->options.peers_dir,
                  "agent: directory of the peers' JSON results (bench/peers/results) to put "
                  "side by side with troupe, as ratios; channel with --channel-type telegram: "
                  "the directory holding openclaw/ (bench/peers), to run OpenClaw's Telegram "
                  "channel beside troupe's with the same simulated users");
  cmd->add_option("--users", opts->options.users,
                  "channel, --channel-type telegram: numbers of simulated Telegram users, one "
                  "level each (default 1,10,100); each sends --runs messages (default "
                  "ceil(20/N)) one at a time through the Bot API fake in polling mode")
      ->delimiter(',');
  cmd->add_option("--warmup-messages", opts->options.warmup_messages,
                  "channel, telegram users: unrecorded messages of a warm-up user first "
                  "(default 3)");
  cmd->add_option("--task", opts->options.task,
                  "agent: agent (the 3-step tool task, plus the one-round levels of one-round "
                  "peer results such as OpenClaw's), one-round (only the one-round reply through "
                  "troupe's OpenAI-compatible route) or all")
      ->capture_default_str();
  cmd->add_option("--peers-out", opts->options.peers_out,
                  "agent: also write troupe-c<N>.json in the peers' format into this directory");
  cmd->add_option("--agent-script", opts->options.agent_script,
                  "agent, storage: mock-llm script (default bench/peers/agent_scenario.jsonl)");
  cmd->add_option("--agent-fixture", opts->options.agent_fixture,
                  "agent, storage: the input.txt put into each workspace (default "
                  "bench/peers/fixtures/input.txt)");
  cmd->add_option("--rate", opts->options.rate, "open loop: requests per second (fixed step)");
  cmd->add_option("--concurrency", opts->options.concurrency,
                  "closed loop: concurrent workers / streams (agent: one level instead of 1, "
                  "100 and 1000; storage: default 100)");
  cmd->add_option("--duration", opts->duration_s, "seconds to run (throughput: per step)")
      ->capture_default_str();
  cmd->add_option("--timeout-ms", opts->timeout_ms, "deadline of each request")
      ->capture_default_str();
  cmd->add_option("--p99-bound-ms", opts->p99_bound_ms, "throughput: p99 a step must stay under")
      ->capture_default_str();
  cmd->add_option("--tokens", opts->options.tokens,
                  "words per answer / chunks per stream (default 16; stream 64; fire hose 1024)");
  cmd->add_option("--token-delay-ms", opts->options.token_delay_ms, "stream: delay between chunks")
      ->capture_default_str();
  cmd->add_flag("--fire-hose", opts->options.fire_hose, "stream: no delay between chunks");
  cmd->add_option("--out", opts->out, "write the JSON report here (and a PNG chart next to it)");
  cmd->add_flag("--no-chart", opts->no_chart, "do not draw the PNG chart");
  cmd->add_flag("--quiet", opts->quiet, "no progress lines on stderr");
  cmd->add_option("--compare", opts->compare, "print ratios B/A of the metrics of two reports")
      ->expected(2);
  cmd->footer("Targets must be loopback (127.0.0.0/8, ::1, localhost); anything else is "
              "refused before a packet is sent. Every request to troupe carries its admin "
              "token (read from <data-dir>/admin.token for a troupe started here).");
  cmd->callback([&action, opts] {
    opts->options.command_line = own_command_line();
    action = [opts] { return run_bench(*opts); };
  });
}

} // namespace troupe::app
