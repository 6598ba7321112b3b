#include <catch2/catch.hpp>

#include "troupe/runtime/metrics.hpp"

using namespace troupe;

TEST_CASE("counters render with escaped labels in Prometheus text", "[runtime][metrics]") {
  metrics_registry registry;
  registry.counter("x_total", "Things", {{"route", "/a\"b"}}).add(3);
  registry.counter("x_total", "Things", {{"route", "/a\"b"}}).add();
  const auto text = registry.render();
  CHECK_THAT(text, Catch::Contains("# TYPE x_total counter\n"));
  CHECK_THAT(text, Catch::Contains("x_total{route=\"/a\\\"b\"} 4\n"));
}

TEST_CASE("histograms render cumulative buckets, sum and count", "[runtime][metrics]") {
  metrics_registry registry;
  const double bounds[] = {0.1, 1.0};
  auto& h = registry.histogram("lat_seconds", "Latency", {{"route", "/r"}}, bounds);
  h.observe(0.05);
  h.observe(0.5);
  h.observe(0.5);
  h.observe(7.0);
  const auto text = registry.render();
  CHECK_THAT(text, Catch::Contains("lat_seconds_bucket{route=\"/r\",le=\"0.1\"} 1\n"));
  CHECK_THAT(text, Catch::Contains("lat_seconds_bucket{route=\"/r\",le=\"1\"} 3\n"));
  CHECK_THAT(text, Catch::Contains("lat_seconds_bucket{route=\"/r\",le=\"+Inf\"} 4\n"));
  CHECK_THAT(text, Catch::Contains("lat_seconds_count{route=\"/r\"} 4\n"));
  CHECK(h.sum() == Approx(8.05));
}

TEST_CASE("gauges and callback gauges show their current values", "[runtime][metrics]") {
  metrics_registry registry;
  auto& g = registry.gauge("open", "Open things");
  g.add(5);
  g.add(-2);
  int live = 42;
  registry.gauge_callback("live", "Live things", [&live] { return static_cast<double>(live); });
  live = 43;
  const auto text = registry.render();
  CHECK_THAT(text, Catch::Contains("open 3\n"));
  CHECK_THAT(text, Catch::Contains("live 43\n"));
}
