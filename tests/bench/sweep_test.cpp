// `troupe bench --sweep`: parsing and checking of KEY=V1,V2,... (unit), the headline and the
// best point of a sweep (unit, on made-up reports), and short real sweeps against the
// troupe binary and its mock (integration).

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "bench/bench_command.hpp"
#include "support/troupe_process.hpp"
#include "troupe/bench/sweep.hpp"

namespace json = boost::json;
using troupe::bench::bench_report;
using troupe::bench::parse_sweep;
using troupe::bench::scenario_options;
using troupe::bench::sweep_axis;
using troupe::bench::validate_sweep;
using troupe::test::bench;
using troupe::test::read_report;
using troupe::test::run_command;

namespace {

sweep_axis axis(const std::string& text) {
  auto a = parse_sweep(text);
  INFO(text);
  REQUIRE(a);
  return *a;
}

std::string sweep_error(const std::string& text) {
  auto a = parse_sweep(text);
  INFO(text);
  REQUIRE_FALSE(a);
  return a.error().message;
}

scenario_options agent_options() {
  scenario_options o;
  o.scenario = "agent";
  return o;
}

bench_report agent_report(double runs_per_s, double errors) {
  bench_report r;
  r.scenario = "agent";
  r.add("c1.runs_per_s", 10);
  r.add("c1.errors", 0);
  r.add("c100.runs", 100);
  r.add("c100.runs_per_s", runs_per_s);
  r.add("c100.latency.p50_us", 1000);
  r.add("c100.latency.p99_us", 2000);
  r.add("c100.cpu_ms_per_run", 1.5);
  r.add("c100.errors", errors);
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    out.push_back(line);
  }
  return out;
}

} // namespace

TEST_CASE("bench sweep takes TOML values as --troupe-set does, and plain words for string keys",
          "[bench][sweep]") {
  const auto shards = axis("actors.shards=1,2, 4");
  CHECK(shards.key == "actors.shards");
  REQUIRE(shards.values.size() == 3);
  CHECK(shards.values[0].toml == "1");
  CHECK(shards.values[2].toml == "4");
  CHECK(shards.values[2].label == "4");

  const auto quoted = axis(R"(actors.scheduler_policy="sharing","shards")");
  REQUIRE(quoted.values.size() == 2);
  CHECK(quoted.values[0].toml == R"("sharing")");
  CHECK(quoted.values[0].label == "sharing");

  // A bare word is a string only for a string key: the same toml as the quoted form.
  const auto bare = axis("actors.scheduler_policy=sharing,shards");
  REQUIRE(bare.values.size() == 2);
  CHECK(bare.values[0].toml == R"("sharing")");
  CHECK(bare.values[1].label == "shards");
  CHECK(sweep_error("actors.shards=two").find("actors.shards") != std::string::npos);
  CHECK(sweep_error("actors.shards=two").find("not a TOML value") != std::string::npos);
}

TEST_CASE("bench sweep keeps a comma inside quotes or brackets in one value", "[bench][sweep]") {
  const auto origins = axis(R"(api.cors_origins="http://a.test,http://b.test",'*')");
  REQUIRE(origins.values.size() == 2);
  CHECK(origins.values[0].label == "http://a.test,http://b.test");
  CHECK(origins.values[1].label == "*");
}

TEST_CASE("bench sweep refuses an unknown key and names it with the keys near it",
          "[bench][sweep]") {
  const auto e = sweep_error("actors.shard=1,2");
  CHECK(e.find("actors.shard") != std::string::npos);
  CHECK(e.find("unknown key") != std::string::npos);
  CHECK(e.find("actors.shards") != std::string::npos); // the key meant, among the section's
  CHECK(sweep_error("nonsense=1").find("unknown key") != std::string::npos);
  // The bench sets these itself for each troupe it starts.
  CHECK(sweep_error("listen=127.0.0.1:0").find("cannot be swept") != std::string::npos);
  CHECK(sweep_error("data_dir=\"/tmp\"").find("cannot be swept") != std::string::npos);
}

TEST_CASE("bench sweep refuses an empty list, an empty value, a missing '=' and a repeat",
          "[bench][sweep]") {
  CHECK(sweep_error("blocking.threads=").find("no values") != std::string::npos);
  CHECK(sweep_error("blocking.threads=  ").find("no values") != std::string::npos);
  CHECK(sweep_error("blocking.threads=1,,2").find("empty value") != std::string::npos);
  CHECK(sweep_error("blocking.threads=1,").find("empty value") != std::string::npos);
  CHECK(sweep_error("blocking.threads").find("KEY=V1,V2") != std::string::npos);
  CHECK(sweep_error("=1,2").find("no key") != std::string::npos);
  CHECK(sweep_error("blocking.threads=2,2").find("given twice") != std::string::npos);
}

TEST_CASE("bench sweep refuses a value the setting itself rejects, naming the key",
          "[bench][sweep]") {
  for (const std::string text : {"storage.synchronous=normal,sometimes", "blocking.threads=4,-1",
                                 "api.open_metrics=true,maybe", "storage.group_commit_ms=0,1.5",
                                 "actors.scheduler_policy=\"sharing\",\"fifo\""}) {
    const auto e = sweep_error(text);
    INFO(e);
    CHECK(e.starts_with("--sweep " + text.substr(0, text.find('='))));
  }
  // A second line cannot slip another key into the generated config.
  CHECK_FALSE(parse_sweep("blocking.threads=2\nactors.shards = 9"));
}

TEST_CASE("bench sweep checks the axes against the scenario before anything runs",
          "[bench][sweep]") {
  const auto threads = axis("blocking.threads=1,2");
  CHECK(validate_sweep(agent_options(), {threads}));
  CHECK_FALSE(validate_sweep(agent_options(), {}));

  auto twice = validate_sweep(agent_options(), {threads, axis("blocking.threads=4")});
  REQUIRE_FALSE(twice);
  CHECK(twice.error().message.find("swept twice") != std::string::npos);

  auto o = agent_options();
  o.troupe_settings = {"blocking.threads=8"};
  auto both = validate_sweep(o, {threads});
  REQUIRE_FALSE(both);
  CHECK(both.error().message.find("--troupe-set") != std::string::npos);

  o = agent_options();
  o.troupe_url = "http://127.0.0.1:8080";
  CHECK_FALSE(validate_sweep(o, {threads}));

  o = agent_options();
  o.scenario = "overhead";
  auto direct = validate_sweep(o, {threads});
  REQUIRE_FALSE(direct);
  CHECK(direct.error().message.find("--via troupe") != std::string::npos);
  o.via = "troupe";
  CHECK(validate_sweep(o, {threads}));

  // 8 x 9 = 72 points is more than a sweep may have.
  auto big = validate_sweep(agent_options(), {axis("blocking.threads=1,2,3,4,5,6,7,8"),
                                              axis("actors.shards=1,2,3,4,5,6,7,8,9")});
  REQUIRE_FALSE(big);
  CHECK(big.error().message.find("cartesian") != std::string::npos);
}

TEST_CASE("bench sweep runs the cartesian product of several keys, the first slowest",
          "[bench][sweep]") {
  const auto points = troupe::bench::sweep_points(
      {axis("actors.shards=1,2"), axis("actors.scheduler_policy=shards,sharing,stealing")});
  REQUIRE(points.size() == 6);
  CHECK(points[0].describe() == "actors.shards=1, actors.scheduler_policy=shards");
  CHECK(points[2].describe() == "actors.shards=1, actors.scheduler_policy=stealing");
  CHECK(points[3].describe() == "actors.shards=2, actors.scheduler_policy=shards");
}

TEST_CASE("bench sweep ranks agent points by runs/s at the highest level, skipping failed ones",
          "[bench][sweep]") {
  troupe::bench::sweep_result r;
  r.scenario = "agent";
  r.axes = {axis("blocking.threads=1,2,4,8")};
  r.points = troupe::bench::sweep_points(r.axes);
  r.points[0].report = agent_report(500, 0);
  r.points[1].report = agent_report(900, 3); // fastest, but with failed runs
  r.points[2].report = agent_report(700, 0);
  r.points[3].error = "troupe did not start";
  r.headline = troupe::bench::headline_of(*r.points[0].report);
  CHECK(r.headline.main().name == "c100.runs_per_s");
  CHECK(r.headline.main().higher_is_better);
  CHECK(r.headline.errors_metric == "c100.errors");
  troupe::bench::choose_best(r);
  REQUIRE(r.best);
  CHECK(*r.best == 2);

  const auto table = troupe::bench::format_sweep_table(r);
  INFO(table);
  const auto lines = lines_of(table);
  REQUIRE(lines.size() >= 6);
  CHECK(lines[1].find("blocking.threads") != std::string::npos);
  CHECK(lines[1].find("c100 runs/s") != std::string::npos);
  CHECK(lines[4].starts_with("* 4 "));
  CHECK(lines[5].find("failed: troupe did not start") != std::string::npos);
  CHECK(table.find("main metric: c100.runs_per_s (higher is better)") != std::string::npos);
  CHECK(table.find("best: blocking.threads=4 (c100.runs_per_s 700)") != std::string::npos);

  const auto doc = json::parse(troupe::bench::sweep_to_json(r)).as_object();
  CHECK(doc.at("points").as_array().size() == 4);
  CHECK(doc.at("best").at("index").to_number<int>() == 2);
  CHECK(doc.at("main_metric").at("direction").as_string() == "higher");
  CHECK(doc.at("points").at(3).at("error").as_string() == "troupe did not start");
}

TEST_CASE("bench sweep ranks overhead points by the added p50, lower first", "[bench][sweep]") {
  troupe::bench::sweep_result r;
  r.scenario = "overhead";
  r.axes = {axis("actors.scheduler_policy=shards,sharing")};
  r.points = troupe::bench::sweep_points(r.axes);
  for (std::size_t i = 0; i < 2; ++i) {
    bench_report b;
    b.scenario = "overhead";
    b.add("pairs_per_s", 1000);
    b.add("added.p50_us", i == 0 ? 300 : 120);
    b.add("added.p99_us", 900);
    b.add("errors", 0);
    r.points[i].report = b;
  }
  r.headline = troupe::bench::headline_of(*r.points[0].report);
  CHECK(r.headline.main().name == "added.p50_us");
  CHECK_FALSE(r.headline.main().higher_is_better);
  troupe::bench::choose_best(r);
  REQUIRE(r.best);
  CHECK(*r.best == 1);
}

TEST_CASE("troupe bench --sweep with a bad key or value fails before starting anything",
          "[bench][sweep][cli]") {
  for (const std::string sweep : {"actors.shard=1,2", "actors.shards=", "actors.shards=two"}) {
    INFO(sweep);
    // Had a troupe been started, the run would take seconds, not this.
    auto r = run_command(bench + "--scenario agent --concurrency 1 --runs 1 --quiet --sweep '" +
                         sweep + "' 2>&1");
    CHECK(r.status == 2);
    CHECK(r.output.find("actors.shard") != std::string::npos);
    CHECK(r.output.find("point") == std::string::npos);
    CHECK(r.took < std::chrono::milliseconds(3'000));
  }
  auto direct = run_command(bench + "--scenario overhead --sweep blocking.threads=1,2 2>&1");
  CHECK(direct.status == 2);
  CHECK(direct.output.find("--via troupe") != std::string::npos);
}

TEST_CASE("troupe bench --sweep runs the agent scenario once per value and names the best",
          "[bench][sweep][cli][integration]") {
  troupe::test::temp_dir dir;
  const auto out = dir.path() / "sweep.json";
  auto r = run_command(bench +
                       "--scenario agent --concurrency 2 --runs 6 --sweep blocking.threads=1,3 "
                       "--out " +
                       out.string() + " 2>&1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  // The progress of each point, and a table with one row per value.
  CHECK(r.output.find("[sweep] point 1/2 (blocking.threads=1): done") != std::string::npos);
  CHECK(r.output.find("[sweep] point 2/2 (blocking.threads=3): done") != std::string::npos);
  const auto lines = lines_of(r.output);
  const auto heading = std::find_if(lines.begin(), lines.end(), [](const std::string& l) {
    return l.find("blocking.threads") != std::string::npos &&
           l.find("c2 runs/s") != std::string::npos;
  });
  REQUIRE(heading != lines.end());
  REQUIRE(lines.end() - heading >= 3);
  CHECK((heading[1].substr(2).starts_with("1 ")));
  CHECK((heading[2].substr(2).starts_with("3 ")));
  CHECK((heading[1][0] == '*' || heading[2][0] == '*'));
  CHECK(r.output.find("main metric: c2.runs_per_s (higher is better)") != std::string::npos);
  CHECK(r.output.find("best: blocking.threads=") != std::string::npos);

  const auto doc = read_report(out);
  CHECK(doc.at("mode").as_string() == "sweep");
  const auto& points = doc.at("points").as_array();
  REQUIRE(points.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    const auto& p = points[i].as_object();
    CHECK(p.at("settings").at("blocking.threads").as_string() == (i == 0 ? "1" : "3"));
    const auto& metrics = p.at("report").at("metrics").as_object();
    CHECK(metrics.at("c2.runs").to_number<double>() == 6);
    CHECK(metrics.at("c2.errors").to_number<double>() == 0);
    CHECK(p.at("headline").at("c2.runs_per_s").to_number<double>() > 0);
    // Each point ran against its own troupe, started with the point's value.
    const auto& troupe = p.at("report").at("targets").at("c2.troupe").as_object();
    CHECK(std::string(troupe.at("config").as_string())
              .find(std::string("[blocking]\nthreads = ") + (i == 0 ? "1" : "3")) !=
          std::string::npos);
  }
  CHECK(points[0].at("report").at("targets").at("c2.troupe").at("pid") !=
        points[1].at("report").at("targets").at("c2.troupe").at("pid"));
  CHECK(doc.at("best").is_object());
}

TEST_CASE("troupe bench --sweep takes plain words for a string key and runs overhead via troupe",
          "[bench][sweep][cli][integration]") {
  troupe::test::temp_dir dir;
  const auto out = dir.path() / "policy.json";
  auto r = run_command(bench +
                       "--scenario overhead --via troupe --duration 0.5 --quiet "
                       "--sweep actors.scheduler_policy=shards,sharing --out " +
                       out.string() + " 2>&1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("main metric: added.p50_us (lower is better)") != std::string::npos);
  const auto doc = read_report(out);
  const auto& points = doc.at("points").as_array();
  REQUIRE(points.size() == 2);
  CHECK(points[1].at("settings").at("actors.scheduler_policy").as_string() == "\"sharing\"");
  CHECK(points[1].at("report").at("metrics").at("via.count").to_number<double>() > 10);
  CHECK(doc.at("best").is_object());
}
