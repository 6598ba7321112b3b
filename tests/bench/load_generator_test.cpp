#include <chrono>
#include <optional>
#include <string>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include "troupe/bench/load_generator.hpp"

namespace asio = boost::asio;
using namespace std::chrono_literals;
using troupe::bench::load_options;
using troupe::bench::run_load;
using troupe::bench::workload_fn;

namespace {

// A fake server that answers one request at a time, each taking `service`: its capacity
// is 1 / service requests per second, whatever the offered rate.
struct serial_server {
  std::chrono::milliseconds service{20};
  std::chrono::steady_clock::time_point busy_until{};
};

asio::awaitable<std::optional<std::string>> serve_serially(serial_server* s) {
  const auto now = std::chrono::steady_clock::now();
  s->busy_until = std::max(now, s->busy_until) + s->service;
  asio::steady_timer timer(co_await asio::this_coro::executor, s->busy_until);
  co_await timer.async_wait(asio::use_awaitable);
  co_return std::nullopt;
}

asio::awaitable<std::optional<std::string>> always_fail(std::string kind) {
  co_return kind;
}

} // namespace

TEST_CASE("open loop keeps the arrival rate on a slow server and measures from intended time",
          "[bench][generator]") {
  serial_server server; // 50 requests/s at most
  auto* sp = &server;
  workload_fn work = [sp](troupe::net::http_client&, std::chrono::milliseconds) {
    return serve_serially(sp);
  };
  load_options o;
  o.rate = 100; // twice the capacity
  o.duration = 1s;
  o.timeout = 5s;
  const auto r = run_load(o, work);
  // The rate did not drop to what the server could take: all 100 were sent on time.
  CHECK(r.sent == 100);
  CHECK(r.succeeded == 100);
  // Request i is due at i*10 ms and answered at (i+1)*20 ms: latency grows to ~1 s. A
  // generator measuring from the actual send of a waiting request would see ~20 ms.
  CHECK(r.latency.percentile_ns(50) > 400'000'000);
  CHECK(r.latency.percentile_ns(99) > 900'000'000);
  CHECK(r.latency.max_ns() < 1'300'000'000);
  CHECK(r.max_send_lag < 50ms);
}

TEST_CASE("closed loop against the same slow server sees only the service time",
          "[bench][generator]") {
  serial_server server;
  auto* sp = &server;
  workload_fn work = [sp](troupe::net::http_client&, std::chrono::milliseconds) {
    return serve_serially(sp);
  };
  load_options o;
  o.concurrency = 1;
  o.duration = 500ms;
  const auto r = run_load(o, work);
  CHECK(r.succeeded >= 20);
  CHECK(r.succeeded <= 26);
  CHECK(r.latency.percentile_ns(99) < 60'000'000);
  CHECK(r.latency.percentile_ns(50) >= 19'000'000);
}

TEST_CASE("load generator counts errors by kind and records no latency for them",
          "[bench][generator]") {
  workload_fn work = [](troupe::net::http_client&, std::chrono::milliseconds) {
    return always_fail("http_503");
  };
  load_options o;
  o.rate = 200;
  o.duration = 200ms;
  const auto r = run_load(o, work);
  CHECK(r.sent == 40);
  CHECK(r.failed == 40);
  CHECK(r.succeeded == 0);
  CHECK(r.errors_by_kind.at("http_503") == 40);
  CHECK(r.latency.count() == 0);
}
