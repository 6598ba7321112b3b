#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "bench/bench_command.hpp"
#include "net/mock_llm_fixture.hpp"
#include "support/troupe_process.hpp"

namespace json = boost::json;
using troupe::test::bench;
using troupe::test::read_report;
using troupe::test::run_command;

TEST_CASE("troupe bench refuses a target outside loopback before sending anything",
          "[bench][cli]") {
  for (const std::string target :
       {"http://10.0.0.1:8081", "http://8.8.8.8:80", "http://example.com:8081"}) {
    INFO(target);
    // Had anything been tried, the run would end in "does not answer" (exit 3) or wait
    // out the 10 s connect deadline; the refusal comes first, from the URL text.
    auto r = run_command(bench + "--scenario overhead --duration 1 --timeout-ms 10000 --target " +
                         target + " 2>&1");
    CHECK(r.status == 2);
    CHECK(r.output.find("refusing target") != std::string::npos);
    CHECK(r.output.find("does not answer") == std::string::npos);
    CHECK(r.took < std::chrono::milliseconds(5'000));
  }
  auto via = run_command(bench + "--via http://8.8.8.8/ 2>&1");
  CHECK(via.status == 2);
  CHECK(via.output.find("only talks to loopback") != std::string::npos);
}

TEST_CASE("troupe bench overhead against its own mock writes a complete report",
          "[bench][cli][integration]") {
  troupe::test::temp_dir dir;
  const auto out = dir.path() / "overhead.json";
  // 1.5 s: the progress line is printed at 1 s, while requests are still running (a run
  // of exactly 1 s can end before its first tick).
  auto r =
      run_command(bench + "--scenario overhead --duration 1.5 --out " + out.string() + " 2>&1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("direct.p99_us") != std::string::npos);
  CHECK(r.output.find("[overhead]") != std::string::npos); // a progress line
  const auto report = read_report(out);
  CHECK(report.at("scenario").as_string() == "overhead");
  const auto& cmd = report.at("command_line").as_array();
  REQUIRE(cmd.size() >= 6);
  CHECK(cmd[1].as_string() == "bench");
  CHECK(cmd[2].as_string() == "--scenario");
  const auto& machine = report.at("machine").as_object();
  CHECK(machine.at("cores").to_number<int>() >= 1);
  CHECK(machine.at("load_average").as_array().size() == 3);
  CHECK(machine.at("kernel").as_string().starts_with("Linux"));
  const auto& metrics = report.at("metrics").as_object();
  CHECK(metrics.at("direct.count").to_number<double>() > 50);
  CHECK(metrics.at("direct.p50_us").to_number<double>() > 0);
  CHECK(metrics.at("direct.p99_us").to_number<double>() >=
        metrics.at("direct.p50_us").to_number<double>());
  CHECK(metrics.at("errors").to_number<double>() == 0);
  CHECK_FALSE(metrics.contains("added.p99_us"));
  CHECK(report.at("notes").as_array().size() >= 1);
  CHECK(report.at("distributions").as_object().contains("direct"));
  CHECK(std::filesystem::exists(dir.path() / "overhead.png"));
}

TEST_CASE("troupe bench overhead with --via reports both paths and the added latency",
          "[bench][cli][integration]") {
  troupe::test::mock_llm_fixture via;
  troupe::test::temp_dir dir;
  const auto out = dir.path() / "via.json";
  auto r = run_command(bench + "--scenario overhead --duration 1 --quiet --no-chart --via " +
                       via.base_url() + " --out " + out.string() + " 2>&1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto metrics = read_report(out).at("metrics").as_object();
  CHECK(metrics.at("via.count").to_number<double>() > 20);
  CHECK(metrics.at("direct.count").to_number<double>() > 20);
  CHECK(metrics.contains("added.p50_us"));
  CHECK(metrics.contains("added.p99_us"));
  // Every measured request reached the via mock (plus the warm-up and preflight).
  CHECK(via.stats().completion_requests >= metrics.at("via.count").to_number<std::uint64_t>());
}

TEST_CASE("troupe bench --compare prints the ratio of every shared metric", "[bench][cli]") {
  troupe::test::temp_dir dir;
  const auto a = dir.path() / "a.json";
  const auto b = dir.path() / "b.json";
  std::ofstream(a) << R"({"scenario":"overhead","metrics":{"direct.p99_us":100,"only.a":1}})";
  std::ofstream(b) << R"({"scenario":"overhead","metrics":{"direct.p99_us":250,"only.b":1}})";
  auto r = run_command(bench + "--compare " + a.string() + " " + b.string() + " 2>&1");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("direct.p99_us") != std::string::npos);
  CHECK(r.output.find("2.500") != std::string::npos);
  CHECK(r.output.find("only.a") == std::string::npos);
  auto bad = run_command(bench + "--compare " + a.string() + " /nonexistent.json 2>&1");
  CHECK(bad.status == 2);
}

TEST_CASE("troupe bench refuses options that do not fit the scenario before starting anything",
          "[bench][cli]") {
  for (const std::string scenario : {"idle", "agent", "storage"}) {
    INFO(scenario);
    // These run against troupe with a mock-llm of their own: no --target, no --via.
    auto r = run_command(bench + "--scenario " + scenario + " --target http://127.0.0.1:9 2>&1");
    CHECK(r.status == 2);
    CHECK(r.output.find("no --target or --via") != std::string::npos);
  }
  auto unknown = run_command(bench + "--scenario nonsense 2>&1");
  CHECK(unknown.status == 2);
  CHECK(unknown.output.find("unknown scenario") != std::string::npos);
  auto loaded_overhead = run_command(bench + "--scenario overhead --rate 100 2>&1");
  CHECK(loaded_overhead.status == 2);
  CHECK(loaded_overhead.output.find("concurrency 1 by design") != std::string::npos);
  auto no_token = run_command(bench + "--scenario overhead --via troupe --troupe "
                                      "http://127.0.0.1:9 2>&1");
  CHECK(no_token.status == 2);
  CHECK(no_token.output.find("--token") != std::string::npos);
  auto far_troupe = run_command(bench + "--scenario agent --troupe http://10.1.2.3:8080 --token "
                                        "x 2>&1");
  CHECK(far_troupe.status == 2);
  CHECK(far_troupe.output.find("only talks to loopback") != std::string::npos);
  auto bad_setting = run_command(bench + "--scenario overhead --via troupe --troupe-set nonsense "
                                         "2>&1");
  CHECK(bad_setting.status == 2);
  CHECK(bad_setting.output.find("KEY=VALUE") != std::string::npos);
}

TEST_CASE("troupe bench stream measures paced tokens and gaps no shorter than the pacing",
          "[bench][cli][integration]") {
  troupe::test::temp_dir dir;
  const auto out = dir.path() / "stream.json";
  auto r = run_command(bench +
                       "--scenario stream --concurrency 4 --tokens 8 --token-delay-ms 5 "
                       "--duration 0.5 --quiet --no-chart --out " +
                       out.string() + " 2>&1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto metrics = read_report(out).at("metrics").as_object();
  const auto streams = metrics.at("streams_completed").to_number<double>();
  CHECK(streams >= 4);
  CHECK(metrics.at("tokens_received").to_number<double>() == 8 * streams);
  CHECK(metrics.at("errors").to_number<double>() == 0);
  // Gaps between paced chunks cannot be shorter than the mock's delay (minus the timer's
  // slack); the median sits at it.
  CHECK(metrics.at("gap.p50_us").to_number<double>() >= 4'000);
  CHECK(metrics.at("ttft.count").to_number<double>() == streams);
}

TEST_CASE("troupe bench throughput at a fixed rate runs one open-loop step at that rate",
          "[bench][cli][integration]") {
  troupe::test::temp_dir dir;
  const auto out = dir.path() / "throughput.json";
  auto r = run_command(bench +
                       "--scenario throughput --rate 200 --duration 0.5 --quiet "
                       "--no-chart --out " +
                       out.string() + " 2>&1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto report = read_report(out);
  CHECK(report.at("steps").as_array().size() == 1);
  const auto& metrics = report.at("metrics").as_object();
  CHECK(metrics.at("latency.count").to_number<double>() == 100);
  CHECK(metrics.at("achieved_rate").to_number<double>() == Approx(200).epsilon(0.2));
  CHECK(metrics.at("errors").to_number<double>() == 0);
}
