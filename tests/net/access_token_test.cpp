#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include "support/run_until_done.hpp"
#include "support/wait_until.hpp"
#include "troupe/net/channel/access_token.hpp"

// g++ 12 at -O2 reports -Wmismatched-new-delete for Asio coroutine frames it inlines: a
// known false positive (awaitable_frame_base pairs its own operator new and delete).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

using namespace troupe;
using namespace troupe::net;
using namespace troupe::net::channel;
using namespace std::chrono_literals;
using troupe::test::run_until_done;
using troupe::test::wait_until;

namespace asio = boost::asio;

namespace {

/// A token endpoint in a function: numbered tokens living `life`, after `yields` turns of
/// the executor (a fetch that is in flight while other coroutines run), failing while
/// `failing` holds.
struct token_source {
  std::chrono::milliseconds life = 10min;
  int yields = 0;
  /// When set, the fetch also waits until this holds.
  std::function<bool()> hold_until;
  std::atomic<bool> failing{false};
  std::atomic<int> calls{0};

  access_token_cache::fetcher fetcher() {
    return [this](http_client& http) -> asio::awaitable<expected<access_token>> {
      const int n = ++calls;
      for (int i = 0; i < yields; ++i) {
        co_await asio::post(http.get_executor(), asio::use_awaitable);
      }
      const auto give_up = std::chrono::steady_clock::now() + 10s;
      while (hold_until && !hold_until() && std::chrono::steady_clock::now() < give_up) {
        co_await asio::post(http.get_executor(), asio::use_awaitable);
      }
      if (failing.load()) {
        co_return fail(errc::unavailable, "HTTP 503 from the token endpoint");
      }
      co_return access_token{"t" + std::to_string(n), std::chrono::steady_clock::now() + life};
    };
  }
};

std::string text_of(const expected<std::string>& r) {
  return r ? *r : "error: " + r.error().message;
}

} // namespace

TEST_CASE("the access-token cache fetches once and reuses the token", "[net][channels][token]") {
  asio::io_context io;
  http_client http(io.get_executor());
  token_source source;
  access_token_cache cache(source.fetcher());
  CHECK(text_of(run_until_done(io, cache.get(http))) == "t1");
  CHECK(text_of(run_until_done(io, cache.get(http))) == "t1");
  CHECK(text_of(run_until_done(io, cache.get(http))) == "t1");
  CHECK(source.calls == 1);
  CHECK(cache.fetches() == 1);
}

TEST_CASE("the access-token cache fetches again inside the refresh margin",
          "[net][channels][token]") {
  asio::io_context io;
  http_client http(io.get_executor());
  token_source source;
  SECTION("a token living less than twice the margin is reused for half its life") {
    // A 10-minute token with a 15-minute margin: refreshed at half its life, not reused
    // for 5 minutes.
    access_token_cache cache(source.fetcher(), std::chrono::seconds(900));
    CHECK(text_of(run_until_done(io, cache.get(http))) == "t1");
    CHECK(text_of(run_until_done(io, cache.get(http))) == "t1");
    CHECK(source.calls == 1);
  }
  SECTION("a short-lived token is fetched again before it expires") {
    source.life = 1s;
    access_token_cache cache(source.fetcher(), std::chrono::seconds(300));
    CHECK(text_of(run_until_done(io, cache.get(http))) == "t1");
    const auto first_expiry = std::chrono::steady_clock::now() + 1s;
    std::string seen;
    REQUIRE(wait_until(
        [&] {
          seen = text_of(run_until_done(io, cache.get(http)));
          return seen != "t1";
        },
        5s));
    CHECK(seen == "t2");
    // Refreshed while the first token still worked.
    CHECK(std::chrono::steady_clock::now() < first_expiry);
  }
  SECTION("a failed early refresh keeps the token that still works") {
    source.life = 1s;
    access_token_cache cache(source.fetcher(), std::chrono::seconds(300));
    CHECK(text_of(run_until_done(io, cache.get(http))) == "t1");
    source.failing = true;
    std::string seen;
    REQUIRE(wait_until(
        [&] {
          seen = text_of(run_until_done(io, cache.get(http)));
          return source.calls.load() > 1;
        },
        5s));
    CHECK(seen == "t1");
    // Once it expired, the refresh's error is the answer.
    REQUIRE(wait_until(
        [&] {
          seen = text_of(run_until_done(io, cache.get(http)));
          return seen != "t1";
        },
        5s));
    CHECK(seen == "error: HTTP 503 from the token endpoint");
  }
}

TEST_CASE("the access-token cache's invalidate drops only the stale token",
          "[net][channels][token]") {
  asio::io_context io;
  http_client http(io.get_executor());
  token_source source;
  access_token_cache cache(source.fetcher());
  CHECK(text_of(run_until_done(io, cache.get(http))) == "t1");
  cache.invalidate("t1");
  CHECK(text_of(run_until_done(io, cache.get(http))) == "t2");
  // A sender that still held t1 reports it stale after t2 arrived: t2 stays.
  cache.invalidate("t1");
  cache.invalidate("");
  CHECK(text_of(run_until_done(io, cache.get(http))) == "t2");
  CHECK(source.calls == 2);
}

TEST_CASE("concurrent gets of the access-token cache share one fetch", "[net][channels][token]") {
  asio::io_context io;
  http_client http(io.get_executor());
  token_source source;
  source.yields = 50;
  access_token_cache cache(source.fetcher());
  std::vector<std::string> got;
  for (int i = 0; i < 8; ++i) {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          auto getting = cache.get(http);
          got.push_back(text_of(co_await std::move(getting)));
        },
        asio::detached);
  }
  io.run();
  CHECK(got == std::vector<std::string>(8, "t1"));
  CHECK(source.calls == 1);
}

TEST_CASE("gets of the access-token cache on two io threads share one fetch",
          "[net][channels][token]") {
  asio::io_context first_io;
  asio::io_context second_io;
  http_client first(first_io.get_executor());
  http_client second(second_io.get_executor());
  token_source source;
  access_token_cache cache(source.fetcher());
  // The first thread's fetch ends only once the second thread's get waits for it.
  source.hold_until = [&] { return cache.waiting() == 1; };
  std::string a;
  std::string b;
  bool started = false;
  asio::co_spawn(
      first_io, [&]() -> asio::awaitable<void> { a = text_of(co_await cache.get(first)); },
      asio::detached);
  std::thread other([&] {
    // Starts once the first thread's fetch is in flight.
    started = wait_until([&] { return source.calls.load() == 1; }, 10s);
    asio::co_spawn(
        second_io, [&]() -> asio::awaitable<void> { b = text_of(co_await cache.get(second)); },
        asio::detached);
    second_io.run();
  });
  first_io.run();
  other.join();
  REQUIRE(started);
  CHECK(a == "t1");
  CHECK(b == "t1");
  CHECK(source.calls == 1);
}

TEST_CASE("a failed access-token fetch returns its error and the next get fetches again",
          "[net][channels][token]") {
  asio::io_context io;
  http_client http(io.get_executor());
  token_source source;
  source.yields = 10;
  source.failing = true;
  access_token_cache cache(source.fetcher());
  std::vector<std::string> got;
  for (int i = 0; i < 3; ++i) {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          auto getting = cache.get(http);
          got.push_back(text_of(co_await std::move(getting)));
        },
        asio::detached);
  }
  io.run();
  // The waiters get the one fetch's error, not a fetch each.
  CHECK(got == std::vector<std::string>(3, "error: HTTP 503 from the token endpoint"));
  CHECK(source.calls == 1);
  source.failing = false;
  io.restart();
  CHECK(text_of(run_until_done(io, cache.get(http))) == "t2");
  CHECK(source.calls == 2);
}
