#include <atomic>
#include <future>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include "support/event_count.hpp"
#include "support/raw_http.hpp"
#include "support/wait_until.hpp"
#include "troupe/net/http_server.hpp"

using namespace troupe;
using namespace troupe::net;
using namespace std::chrono_literals;
using troupe::test::body_of;
using troupe::test::http_exchange;
using troupe::test::raw_client;
using troupe::test::status_of;

namespace {

// A server on an ephemeral loopback port with one io thread.
struct running_server {
  explicit running_server(router routes, http_server_options options = {})
      : server(io, std::move(routes), std::move(options), metrics) {
    port = server.listen({"127.0.0.1", 0}).value().port;
    server.start();
    thread = std::thread([this] { io.run(); });
  }
  ~running_server() {
    if (!stopped) {
      stop(0ms);
    }
    work.reset();
    io.stop();
    thread.join();
  }
  // Graceful stop; returns how long it took.
  std::chrono::milliseconds stop(std::chrono::milliseconds grace) {
    const auto start = std::chrono::steady_clock::now();
    std::promise<void> done;
    server.stop(grace, [&done] { done.set_value(); });
    done.get_future().wait();
    stopped = true;
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start);
  }
  std::int64_t gauge(const char* name) {
    return metrics.gauge(name, "").value();
  }

  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  metrics_registry metrics;
  http_server server;
  std::uint16_t port = 0;
  std::thread thread;
  bool stopped = false;
};

asio::awaitable<http_response> echo_name(std::string name, std::string request_id) {
  co_return http_response::text(200, name + "|" + request_id);
}

asio::awaitable<http_response> sleep_then_answer(std::chrono::milliseconds delay) {
  asio::steady_timer timer(co_await asio::this_coro::executor, delay);
  co_await timer.async_wait(asio::use_awaitable);
  co_return http_response::text(200, "slept");
}

asio::awaitable<http_response> throw_inside() {
  throw std::runtime_error("boom");
  co_return http_response{};
}

// Shares the response_stream of the latest /sse request with the test thread, and tells
// it what the handlers saw: /slow requests begun, sse clients gone.
struct stream_slot {
  std::mutex mutex;
  std::promise<response_stream> promise;
  troupe::test::event_count slow_begun;
  troupe::test::event_count disconnects;
};

router test_routes(std::shared_ptr<stream_slot> slot) {
  router r;
  r.add(http_method::get, "/echo/{name}", [](request_context& ctx) {
    return echo_name(std::string(ctx.param("name")), ctx.request_id());
  });
  r.add(http_method::get, "/slow", [slot](request_context& ctx) {
    slot->slow_begun.raise();
    return sleep_then_answer(std::chrono::milliseconds(std::stoi(ctx.request().query_param("ms"))));
  });
  r.add(http_method::get, "/patient", [](request_context& ctx) {
    ctx.extend_deadline(std::chrono::seconds(5));
    return sleep_then_answer(std::chrono::milliseconds(std::stoi(ctx.request().query_param("ms"))));
  });
  r.add(http_method::post, "/upload", [](request_context& ctx) {
    return echo_name(std::to_string(ctx.request().body.size()), ctx.request_id());
  });
  r.add(http_method::get, "/throw", [](request_context&) { return throw_inside(); });
  r.add(http_method::get, "/sse", [slot](request_context& ctx) {
    auto stream = ctx.begin_sse();
    stream.on_disconnect([slot] { slot->disconnects.raise(); });
    slot->promise.set_value(stream);
    return sleep_then_answer(0ms);
  });
  return r;
}

} // namespace

TEST_CASE("server routes with parameters and echoes a sane request id", "[net][http]") {
  running_server s(test_routes(std::make_shared<stream_slot>()));
  const auto response =
      http_exchange(s.port, "GET", "/echo/hi%20there", {}, "X-Request-Id: req-42\r\n");
  CHECK(status_of(response) == 200);
  CHECK(body_of(response) == "hi there|req-42");
  CHECK_THAT(response, Catch::Contains("X-Request-Id: req-42"));
  // A hostile request id is replaced, not echoed.
  const auto other = http_exchange(s.port, "GET", "/echo/x", {}, "X-Request-Id: a\"b<c>\r\n");
  CHECK_THAT(other, !Catch::Contains("a\"b<c>"));
}

TEST_CASE("server keeps a connection alive across pipelined requests", "[net][http]") {
  running_server s(test_routes(std::make_shared<stream_slot>()));
  raw_client c(s.port);
  c.send("GET /echo/one HTTP/1.1\r\nHost: x\r\n\r\n"
         "GET /echo/two HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const auto all = c.read_until_closed();
  CHECK(all.find("one|") != std::string::npos);
  CHECK(all.find("two|") != std::string::npos);
  CHECK(all.find("HTTP/1.1 200") != all.rfind("HTTP/1.1 200"));
}

TEST_CASE("server answers unknown routes and methods with the JSON error body", "[net][http]") {
  running_server s(test_routes(std::make_shared<stream_slot>()));
  const auto missing = http_exchange(s.port, "GET", "/nowhere");
  CHECK(status_of(missing) == 404);
  CHECK(body_of(missing) == R"({"error":{"code":"not_found","message":"no route for /nowhere"}})");
  CHECK_THAT(missing, Catch::Contains("Content-Type: application/json"));
  const auto wrong = http_exchange(s.port, "DELETE", "/upload");
  CHECK(status_of(wrong) == 405);
  CHECK_THAT(wrong, Catch::Contains("Allow: POST"));
  CHECK_THAT(body_of(wrong), Catch::Contains(R"("code":"method_not_allowed")"));
}

TEST_CASE("server rejects bodies over the limit with 413", "[net][http]") {
  http_server_options options;
  options.body_limit_bytes = 1000;
  running_server s(test_routes(std::make_shared<stream_slot>()), options);
  SECTION("declared by Content-Length") {
    const auto r = http_exchange(s.port, "POST", "/upload", std::string(1001, 'x'));
    CHECK(status_of(r) == 413);
    CHECK_THAT(body_of(r), Catch::Contains(R"("code":"payload_too_large")"));
  }
  SECTION("sent chunked") {
    raw_client c(s.port);
    c.send("POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 3; ++i) {
      c.send("1f4\r\n" + std::string(500, 'y') + "\r\n");
    }
    c.send("0\r\n\r\n");
    CHECK(status_of(c.read_until_closed()) == 413);
  }
  SECTION("exactly at the limit is accepted") {
    const auto r = http_exchange(s.port, "POST", "/upload", std::string(1000, 'x'));
    CHECK(status_of(r) == 200);
    CHECK(body_of(r).rfind("1000|", 0) == 0);
  }
}

TEST_CASE("server answers garbage with 400 and keeps serving other connections", "[net][http]") {
  running_server s(test_routes(std::make_shared<stream_slot>()));
  raw_client keeper(s.port);
  keeper.send("GET /echo/first HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK_THAT(keeper.read_until("first|"), Catch::Contains("200 OK"));

  raw_client bad(s.port);
  bad.send(std::string("\x16\x03\x01\x00garbage\r\n\r\n", 14));
  const auto answer = bad.read_until_closed();
  CHECK(status_of(answer) == 400);
  CHECK_THAT(body_of(answer), Catch::Contains(R"("code":"bad_request")"));

  keeper.send("GET /echo/second HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK_THAT(keeper.read_until("second|"), Catch::Contains("second|"));
}

TEST_CASE("server answers 504 when a handler outlives the request deadline", "[net][http]") {
  http_server_options options;
  options.request_timeout = 200ms;
  running_server s(test_routes(std::make_shared<stream_slot>()), options);
  const auto start = std::chrono::steady_clock::now();
  const auto r = http_exchange(s.port, "GET", "/slow?ms=5000");
  CHECK(status_of(r) == 504);
  CHECK_THAT(body_of(r), Catch::Contains(R"("code":"timeout")"));
  CHECK(std::chrono::steady_clock::now() - start < 3s);
}

TEST_CASE("a handler may extend its own deadline", "[net][http]") {
  http_server_options options;
  options.request_timeout = 200ms;
  running_server s(test_routes(std::make_shared<stream_slot>()), options);
  const auto r = http_exchange(s.port, "GET", "/patient?ms=600");
  CHECK(status_of(r) == 200);
  CHECK(body_of(r) == "slept");
}

TEST_CASE("server turns a handler exception into a 500 JSON error", "[net][http]") {
  running_server s(test_routes(std::make_shared<stream_slot>()));
  const auto r = http_exchange(s.port, "GET", "/throw");
  CHECK(status_of(r) == 500);
  CHECK_THAT(body_of(r), Catch::Contains(R"("code":"internal")"));
  CHECK(status_of(http_exchange(s.port, "GET", "/echo/alive")) == 200);
}

TEST_CASE("sse streams deliver events in order and end with the last chunk", "[net][sse]") {
  auto slot = std::make_shared<stream_slot>();
  running_server s(test_routes(slot));
  raw_client c(s.port);
  c.send("GET /sse HTTP/1.1\r\nHost: x\r\n\r\n");
  auto stream = slot->promise.get_future().get();
  CHECK_THAT(c.read_until(": ping"), Catch::Contains("Content-Type: text/event-stream"));
  for (int i = 0; i < 100; ++i) {
    REQUIRE(stream.try_send({"message", std::to_string(i), {}, "line " + std::to_string(i)}) ==
            stream_write_result::queued);
  }
  stream.finish();
  const auto all = c.take_until("\r\n0\r\n\r\n");
  CHECK(all.find("id: 0\n") < all.find("id: 99\n"));
  CHECK_THAT(all, Catch::Contains("data: line 99\n\n"));
  CHECK_THAT(all, Catch::EndsWith("0\r\n\r\n"));
  CHECK(slot->disconnects.value() == 0);
  CHECK_FALSE(stream.is_open());
}

TEST_CASE("a finished stream leaves its keep-alive connection to the client's next request",
          "[net][sse]") {
  auto slot = std::make_shared<stream_slot>();
  running_server s(test_routes(slot));
  raw_client c(s.port);
  c.send("GET /sse HTTP/1.1\r\nHost: x\r\n\r\n");
  auto stream = slot->promise.get_future().get();
  CHECK_THAT(c.read_until(": ping"), !Catch::Contains("Connection: close"));
  // The next request is sent while the stream is still open (pipelined): its bytes are
  // kept and it is served once the stream ends.
  c.send("GET /echo/next HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  REQUIRE(stream.try_send({"message", "1", {}, "only"}) == stream_write_result::queued);
  stream.finish();
  const auto all = c.read_until_closed();
  const auto end_of_stream = all.find("\r\n0\r\n\r\n");
  REQUIRE(end_of_stream != std::string::npos);
  CHECK_THAT(all, Catch::Contains("data: only\n\n"));
  CHECK(all.find("next|", end_of_stream) != std::string::npos);
  CHECK(slot->disconnects.value() == 0);
}

TEST_CASE("a stream answered to a Connection: close request closes after its last chunk",
          "[net][sse]") {
  auto slot = std::make_shared<stream_slot>();
  running_server s(test_routes(slot));
  raw_client c(s.port);
  c.send("GET /sse HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  auto stream = slot->promise.get_future().get();
  CHECK_THAT(c.read_until(": ping"), Catch::Contains("Connection: close"));
  stream.finish();
  const auto started = std::chrono::steady_clock::now();
  const auto all = c.read_until_closed();
  CHECK_THAT(all, Catch::EndsWith("0\r\n\r\n"));
  // Closed by the server, not by the reader's timeout.
  CHECK(std::chrono::steady_clock::now() - started < 4s);
}

TEST_CASE("a client that leaves an sse stream is reported to the producer", "[net][sse]") {
  auto slot = std::make_shared<stream_slot>();
  running_server s(test_routes(slot));
  auto c = std::make_unique<raw_client>(s.port);
  c->send("GET /sse HTTP/1.1\r\nHost: x\r\n\r\n");
  auto stream = slot->promise.get_future().get();
  c->read_until(": ping");
  CHECK(s.gauge("troupe_http_open_streams") == 1);
  c->reset();
  REQUIRE(slot->disconnects.wait_for(1, 5s));
  CHECK(slot->disconnects.value() == 1);
  CHECK(stream.client_gone());
  CHECK(stream.try_send({"", "", {}, "late"}) == stream_write_result::closed);
  // The gauge drops when the session ends, which may trail the producer's notice.
  CHECK(troupe::test::wait_until([&] { return s.gauge("troupe_http_open_streams") == 0; }, 5s));
}

TEST_CASE("a slow sse client fills only its own queue", "[net][sse]") {
  http_server_options options;
  options.stream_queue_capacity = 4;
  auto slot = std::make_shared<stream_slot>();
  running_server s(test_routes(slot), options);
  raw_client slow(s.port);
  // A tiny receive buffer so the kernel cannot absorb the stream for us.
  int small = 4096;
  ::setsockopt(slow.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  slow.send("GET /sse HTTP/1.1\r\nHost: x\r\n\r\n");
  auto stream = slot->promise.get_future().get();
  const std::string big(64 * 1024, 'z');
  bool saw_full = false;
  for (int i = 0; i < 2000 && !saw_full; ++i) {
    const auto result = stream.try_write(big);
    REQUIRE(result != stream_write_result::closed);
    saw_full = result == stream_write_result::full;
  }
  CHECK(saw_full); // the producer was told, and was never blocked
  // Everyone else is served while the slow client's queue is full.
  CHECK(status_of(http_exchange(s.port, "GET", "/echo/other")) == 200);
  stream.finish();
}

TEST_CASE("graceful stop lets an in-flight request finish and refuses new ones", "[net][http]") {
  auto slot = std::make_shared<stream_slot>();
  running_server s(test_routes(slot));
  raw_client idle(s.port);
  idle.send("GET /echo/x HTTP/1.1\r\nHost: x\r\n\r\n");
  idle.read_until("x|");
  auto in_flight =
      std::async(std::launch::async, [&] { return http_exchange(s.port, "GET", "/slow?ms=400"); });
  REQUIRE(slot->slow_begun.wait_for(1, 5s)); // the request is in its handler
  const auto took = s.stop(5000ms);
  const auto answer = in_flight.get();
  CHECK(status_of(answer) == 200);
  CHECK(body_of(answer) == "slept");
  CHECK(took < 4000ms);
  // The idle keep-alive connection was closed, and nobody is accepted any more.
  idle.read_until_closed(1000ms);
  CHECK(idle.closed());
  CHECK_THROWS(raw_client(s.port));
}

TEST_CASE("graceful stop closes streams still open when the grace runs out", "[net][sse]") {
  auto slot = std::make_shared<stream_slot>();
  running_server s(test_routes(slot));
  raw_client c(s.port);
  c.send("GET /sse HTTP/1.1\r\nHost: x\r\n\r\n");
  auto stream = slot->promise.get_future().get();
  c.read_until(": ping");
  const auto took = s.stop(300ms);
  CHECK(took >= 300ms);
  CHECK(took < 3000ms);
  c.read_until_closed(2000ms);
  CHECK(c.closed());
  CHECK_FALSE(stream.is_open());
}
