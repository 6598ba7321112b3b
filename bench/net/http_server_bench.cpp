// HTTP server round trips on loopback: one keep-alive client, one io thread.
// Reports requests/s and the mean round trip; run in full with `make bench`.

#include <thread>

#include <benchmark/benchmark.h>
#include <boost/asio/executor_work_guard.hpp>

#include "../../tests/support/raw_http.hpp"
#include "troupe/net/http_server.hpp"

using namespace troupe;
using namespace troupe::net;

namespace {

asio::awaitable<http_response> answer_ok() {
  co_return http_response::json(200, R"({"status":"ok"})");
}

void BM_http_keepalive_round_trip(benchmark::State& state) {
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  metrics_registry metrics;
  router routes;
  routes.add(http_method::get, "/healthz", [](request_context&) { return answer_ok(); });
  http_server server(io, std::move(routes), {}, metrics);
  const auto port = server.listen({"127.0.0.1", 0}).value().port;
  server.start();
  std::thread thread([&io] { io.run(); });
  {
    troupe::test::raw_client client(port);
    const std::string request = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    for (auto _ : state) {
      client.send(request);
      auto response = client.take_until("{\"status\":\"ok\"}");
      if (response.empty()) {
        state.SkipWithError("no response");
        break;
      }
      benchmark::DoNotOptimize(response);
    }
  }
  state.SetItemsProcessed(state.iterations());
  work.reset();
  io.stop();
  thread.join();
}

} // namespace

BENCHMARK(BM_http_keepalive_round_trip)->UseRealTime();
