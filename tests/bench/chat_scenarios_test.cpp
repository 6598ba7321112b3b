// Smoke runs of the scenarios that start a troupe child: tiny loads, real processes.

#include <array>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <catch2/catch.hpp>

#include "bench/bench_command.hpp"
#include "support/troupe_process.hpp"

namespace json = boost::json;
using troupe::test::bench;
using troupe::test::read_report;
using troupe::test::run_command;

namespace {

double metric(const json::object& report, const std::string& name) {
  const auto& metrics = report.at("metrics").as_object();
  INFO(name);
  REQUIRE(metrics.contains(name));
  return metrics.at(name).to_number<double>();
}

/// Every `--channel-type` the bench drives, in the order its help and errors list them: the
/// generic webhook, then one per platform adapter, each against its fake (fakes/).
constexpr std::array<std::string_view, 8> channel_types{
    "webhook", "telegram", "slack", "wecom", "wechat_mp", "whatsapp", "feishu", "dingtalk"};

/// The troupe child a report describes is gone, and so is its temporary directory.
void check_child_cleaned_up(const json::object& troupe) {
  const auto pid = troupe.at("pid").to_number<long>();
  CHECK_FALSE(std::filesystem::exists("/proc/" + std::to_string(pid) + "/status"));
  const std::filesystem::path data_dir(std::string(troupe.at("data_dir").as_string()));
  CHECK_FALSE(std::filesystem::exists(data_dir.parent_path()));
}

} // namespace

TEST_CASE("troupe bench overhead --via troupe starts troupe, measures both paths and stops it",
          "[bench][cli][integration]") {
  troupe::test::temp_dir dir;
  const auto out = dir.path() / "overhead.json";
  auto r = run_command(bench +
                       "--scenario overhead --via troupe --duration 1 --quiet --no-chart "
                       "--out " +
                       out.string() + " 2>&1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto report = read_report(out);
  CHECK(metric(report, "via.count") > 20);
  CHECK(metric(report, "direct.count") > 20);
  CHECK(metric(report, "errors") == 0);
  // Through troupe is slower than straight to the mock: a run actor, a provider call.
  CHECK(metric(report, "via.p50_us") > metric(report, "direct.p50_us"));
  CHECK(metric(report, "troupe.rss_end_kib") > 1'000);
  const auto& targets = report.at("targets").as_object();
  CHECK(std::string(targets.at("via").as_string()).ends_with("/v1/chat/completions"));
  check_child_cleaned_up(targets.at("troupe").as_object());
}

TEST_CASE("troupe bench stream --via troupe relays every token and reports the added time",
          "[bench][cli][integration]") {
  troupe::test::temp_dir dir;
  const auto out = dir.path() / "stream.json";
  auto r = run_command(bench +
                       "--scenario stream --via troupe --concurrency 2 --tokens 8 "
                       "--token-delay-ms 2 --duration 0.5 --quiet --no-chart --out " +
                       out.string() + " 2>&1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto report = read_report(out);
  CHECK(metric(report, "errors") == 0);
  CHECK(metric(report, "direct.errors") == 0);
  const auto streams = metric(report, "streams_completed");
  CHECK(streams >= 2);
  // Every token arrives, even when troupe merges the deltas of one read into one chunk.
  CHECK(metric(report, "tokens_received") == 8 * streams);
  CHECK(metric(report, "text_chunks_received") <= metric(report, "tokens_received"));
  CHECK(metric(report, "direct.streams_completed") >= 2);
  metric(report, "added.ttft.p99_us");
  metric(report, "added.gap.p50_us");
}

TEST_CASE("troupe bench agent runs the peers' task through the chat API and verifies each run",
          "[bench][cli][integration]") {
  troupe::test::temp_dir dir;
  const auto out = dir.path() / "agent.json";
  const auto peers = dir.path() / "peers";
  const auto peers_out = dir.path() / "peers-out";
  std::filesystem::create_directories(peers);
  std::ofstream(peers / "fake-c3.json")
      << R"({"peer":"fake","concurrency":3,"runs":9,"errors":0,"runs_per_s":2.0,)"
         R"("latency_ms":{"p50":500,"p90":900,"p99":1000,"max":1000},"rss_idle_mb":100,)"
         R"("rss_peak_mb":101,"mem_per_concurrent_run_kb":341.3,"cpu_ms_per_run":4.0})";
  auto r = run_command(bench + "--scenario agent --concurrency 3 --runs 9 --quiet --out " +
                       out.string() + " --peers " + peers.string() + " --peers-out " +
                       peers_out.string() + " 2>&1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto report = read_report(out);
  CHECK(metric(report, "c3.runs") == 9);
  CHECK(metric(report, "c3.errors") == 0);
  CHECK(metric(report, "c3.latency.count") == 9);
  CHECK(metric(report, "c3.mock_calls_per_run") == 2);
  CHECK(metric(report, "c3.rss_idle_kib") > 1'000);
  CHECK(metric(report, "c3.rss_peak_kib") >= metric(report, "c3.rss_idle_kib"));
  CHECK(metric(report, "c3.cpu_ms_per_run") > 0);
  CHECK(metric(report, "mock_own_time.count") > 0);
  // The fake peer is put side by side: the ratio is troupe's runs/s over its 2/s.
  CHECK(metric(report, "c3.vs.fake.runs_per_s_ratio") ==
        Approx(metric(report, "c3.runs_per_s") / 2.0));
  CHECK(r.output.find("side by side") != std::string::npos);
  const auto row = read_report(peers_out / "troupe-c3.json");
  CHECK(row.at("peer").as_string() == "troupe");
  CHECK(row.at("errors").to_number<int>() == 0);
  CHECK(std::filesystem::exists(dir.path() / "agent.png"));
  check_child_cleaned_up(report.at("targets").as_object().at("c3.troupe").as_object());
}

TEST_CASE("troupe bench agent puts a one-round peer beside troupe's own one-round rows and "
          "keeps it out of the tool task's table",
          "[bench][cli][integration]") {
  troupe::test::temp_dir dir;
  const auto out = dir.path() / "agent.json";
  const auto peers = dir.path() / "peers";
  const auto peers_out = dir.path() / "peers-out";
  std::filesystem::create_directories(peers);
  // A one-round result at concurrency 2 (as bench/peers/openclaw writes) and a tool-task
  // result at the same level, which must not be compared with the one-round rows.
  std::ofstream(peers / "claw-one-round-c2.json")
      << R"({"peer":"claw","task":"one-round","concurrency":2,"runs":10,"errors":0,)"
         R"("runs_per_s":4.0,"latency_ms":{"p50":500,"p90":600,"p99":700,"max":700},)"
         R"("beyond_mock_ms":{"p50":499,"p99":699},"rss_idle_mb":1000,"rss_peak_mb":1200,)"
         R"("mem_per_concurrent_run_kb":100000,"cpu_ms_per_run":500.0})";
  std::ofstream(peers / "tool-c2.json")
      << R"({"peer":"tool","concurrency":2,"runs":9,"errors":0,"runs_per_s":2.0,)"
         R"("latency_ms":{"p50":500,"p90":900,"p99":1000,"max":1000},"rss_idle_mb":100,)"
         R"("rss_peak_mb":101,"mem_per_concurrent_run_kb":341.3,"cpu_ms_per_run":4.0})";
  auto r = run_command(bench + "--scenario agent --task one-round --runs 12 --quiet --no-chart " +
                       "--out " + out.string() + " --peers " + peers.string() + " --peers-out " +
                       peers_out.string() + " 2>&1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto report = read_report(out);
  // Only the peer's level runs, and no tool-task level.
  CHECK(metric(report, "one_round.c2.runs") == 12);
  CHECK(metric(report, "one_round.c2.errors") == 0);
  CHECK(metric(report, "one_round.c2.mock_calls_per_run") == 1);
  CHECK(metric(report, "one_round.mock_own_time.count") > 0);
  CHECK(metric(report, "one_round.c2.vs.claw.runs_per_s_ratio") ==
        Approx(metric(report, "one_round.c2.runs_per_s") / 4.0));
  CHECK(metric(report, "one_round.c2.vs.claw.cpu_per_run_ratio") ==
        Approx(metric(report, "one_round.c2.cpu_ms_per_run") / 500.0));
  const auto& metrics = report.at("metrics").as_object();
  CHECK_FALSE(metrics.contains("c2.runs"));
  CHECK_FALSE(metrics.contains("one_round.c2.vs.tool.runs_per_s_ratio"));
  CHECK(r.output.find("one-round reply") != std::string::npos);
  const auto row = read_report(peers_out / "troupe-one-round-c2.json");
  CHECK(row.at("task").as_string() == "one-round");
  CHECK(row.at("errors").to_number<int>() == 0);
  check_child_cleaned_up(report.at("targets").as_object().at("one_round.c2.troupe").as_object());
}

TEST_CASE("troupe bench channel --channel-type telegram --users answers every simulated "
          "user's message once through the polling fake",
          "[bench][cli][integration]") {
  troupe::test::temp_dir dir;
  const auto out = dir.path() / "telegram-users.json";
  auto r = run_command(bench +
                       "--scenario channel --channel-type telegram --users 1,4 --runs 3 "
                       "--warmup-messages 1 --quiet --no-chart --out " +
                       out.string() + " 2>&1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto report = read_report(out);
  CHECK(metric(report, "telegram.troupe.n1.messages") == 3);
  CHECK(metric(report, "telegram.troupe.n1.replies") == 3);
  CHECK(metric(report, "telegram.troupe.n4.messages") == 12);
  CHECK(metric(report, "telegram.troupe.n4.replies") == 12);
  for (const auto* level : {"n1", "n4"}) {
    const std::string p = std::string("telegram.troupe.") + level;
    CHECK(metric(report, p + ".duplicates") == 0);
    CHECK(metric(report, p + ".lost") == 0);
    CHECK(metric(report, p + ".tag_mismatches") == 0);
    CHECK(metric(report, p + ".latency.count") == metric(report, p + ".replies"));
    CHECK(metric(report, p + ".rss_peak_kib") >= metric(report, p + ".rss_idle_kib"));
    CHECK(metric(report, p + ".cpu_ms_per_message") > 0);
  }
  // troupe polled the fake, and the fake answered every call it made.
  const auto& calls = report.at("troupe_bot_api_calls").as_object();
  CHECK(calls.contains("getUpdates"));
  CHECK(calls.at("sendMessage").as_object().at("200").to_number<int>() == 3 + 12 + 1);
  CHECK(r.output.find("telegram: N users") != std::string::npos);
  // Without --peers, no OpenClaw row.
  CHECK_FALSE(report.at("metrics").as_object().contains("telegram.openclaw.n1.replies"));
}

TEST_CASE("troupe bench storage counts the rows troupe persisted for every run",
          "[bench][cli][integration]") {
  troupe::test::temp_dir dir;
  const auto out = dir.path() / "storage.json";
  auto r = run_command(bench +
                       "--scenario storage --concurrency 2 --runs 6 --quiet --no-chart "
                       "--out " +
                       out.string() + " 2>&1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto report = read_report(out);
  CHECK(metric(report, "c2.errors") == 0);
  CHECK(metric(report, "persisted.runs") == 6);
  // The user's message, the model's tool call, the tool result and the answer, at least.
  CHECK(metric(report, "persisted.messages_per_run") >= 3);
  CHECK(metric(report, "persisted.messages_per_s") > 0);
}

TEST_CASE("troupe bench idle measures memory per conversation, waiting run and subscriber",
          "[bench][cli][integration]") {
  troupe::test::temp_dir dir;
  const auto out = dir.path() / "idle.json";
  auto r = run_command(bench + "--scenario idle --conversations 20 --quiet --no-chart --out " +
                       out.string() + " 2>&1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto report = read_report(out);
  CHECK(metric(report, "conversations") == 20);
  metric(report, "kib_per_conversation");
  metric(report, "kib_per_waiting_run");
  metric(report, "kib_per_subscriber");
  metric(report, "kernel.tcp_kib_per_subscriber");
  // Every subscriber is one more connection troupe holds open. (The machine-wide
  // kernel.tcp_sockets_per_subscriber is reported but not checked: other processes'
  // connections move it, and CI runs tests side by side.)
  metric(report, "kernel.tcp_sockets_per_subscriber");
  CHECK(metric(report, "sockets_per_subscriber") >= 0.9);
  CHECK(report.at("steps").as_array().size() == 4);
}

TEST_CASE("troupe bench channel answers every message once, in order per thread, on every "
          "platform it drives",
          "[bench][cli][integration]") {
  // The generic webhook (the default: run without --channel-type), and every platform
  // against its fake.
  const std::string type(GENERATE(from_range(channel_types)));
  INFO("--channel-type " << type);
  troupe::test::temp_dir dir;
  const auto out = dir.path() / "channel.json";
  auto r = run_command(bench +
                       "--scenario channel --conversations 50 --runs 3 --concurrency 8 --quiet " +
                       (type == "webhook" ? std::string() : "--channel-type " + type + " ") +
                       "--no-chart --out " + out.string() + " 2>&1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto report = read_report(out);
  CHECK(metric(report, "messages") == 150);
  CHECK(metric(report, "deliveries_accepted") == 150);
  CHECK(metric(report, "replies") == 150);
  CHECK(metric(report, "replies_missing") == 0);
  CHECK(metric(report, "replies_duplicated") == 0);
  CHECK(metric(report, "replies_out_of_order") == 0);
  CHECK(metric(report, "replies_unrecognised") == 0);
  CHECK(metric(report, "messages_per_s") > 0);
  // A reply comes after the webhook's own answer: it includes a run and the outbox.
  CHECK(metric(report, "reply.p50_us") > metric(report, "delivery.p50_us"));
  const auto& targets = report.at("targets").as_object();
  CHECK(targets.at("channel_type").as_string() == type);
  // Replies came to the platform's side: the webhook's callback receiver, or a fake.
  CHECK_THAT(std::string(targets.at("platform").as_string()),
             Catch::Contains(type == "webhook" ? "callback receiver" : "fakes/fake_"));
  check_child_cleaned_up(report.at("targets").as_object().at("troupe").as_object());
}

TEST_CASE("troupe bench refuses a channel type it does not drive", "[bench][cli]") {
  auto r = run_command(bench + "--scenario channel --channel-type carrier-pigeon --quiet 2>&1");
  CHECK(r.status != 0);
  std::string listed;
  for (const auto type : channel_types) {
    listed += (listed.empty() ? "" : ", ") + std::string(type);
  }
  CHECK_THAT(r.output, Catch::Contains(listed));
}
