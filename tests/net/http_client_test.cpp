#include <chrono>
#include <exception>
#include <string>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include "mock_llm_fixture.hpp"
#include <curl/curl.h>

#include "troupe/net/http_client.hpp"
#include "troupe/net/provider_wire.hpp"
#include "troupe/net/sse_parser.hpp"

// g++ 12 at -O2 reports -Wmismatched-new-delete for Asio coroutine frames it inlines: a
// known false positive (awaitable_frame_base pairs its own operator new and delete).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

using namespace troupe;
using namespace troupe::net;
using namespace std::chrono_literals;
using troupe::test::count_words;
using troupe::test::mock_llm_fixture;
using troupe::test::run_until_done;

namespace {

struct slow_read {
  std::size_t bytes = 0;
  std::size_t largest_read = 0;
  std::string text;
  bool ended = false;
};

// Reads a long stream slowly, so that the client's buffer fills and curl is paused.
asio::awaitable<slow_read> read_slowly(http_client& http, std::string url) {
  http_client_request req;
  req.method = http_method::post;
  req.url = std::move(url);
  req.headers = {{"Content-Type", "application/json"}, {"X-Mock-Tokens", "3000"}};
  req.body = R"({"model":"m","stream":true,"messages":[{"role":"user","content":"go"}]})";
  slow_read out;
  auto stream = co_await http.open(std::move(req));
  if (!stream) {
    co_return out;
  }
  asio::steady_timer timer(co_await asio::this_coro::executor);
  sse_parser parser;
  openai_stream_decoder decoder;
  std::vector<stream_event> events;
  for (;;) {
    std::string chunk;
    auto more = co_await stream->read(chunk);
    if (!more) {
      co_return out;
    }
    if (!*more) {
      out.ended = true;
      co_return out;
    }
    out.bytes += chunk.size();
    out.largest_read = std::max(out.largest_read, chunk.size());
    auto fed =
        parser.feed(chunk, [&](const sse_message& m) { (void)decoder.decode(m.data, events); });
    if (!fed) {
      co_return out;
    }
    for (const auto& e : events) {
      out.text += e.text;
    }
    events.clear();
    timer.expires_after(2ms);
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

} // namespace

TEST_CASE("a slow reader pauses the transfer at the buffer bound and loses nothing",
          "[net][http_client][integration]") {
  mock_llm_fixture mock;
  asio::io_context io;
  http_client_options options;
  options.max_buffered_bytes = 4096;
  http_client http(io.get_executor(), options);
  const auto r = run_until_done(io, read_slowly(http, mock.base_url() + "/chat/completions"));
  CHECK(r.ended);
  // 3000 words of ~300-byte chunks: far more than the bound, read in bounded pieces.
  CHECK(r.bytes > 500'000);
  CHECK(r.largest_read <= 4096 + CURL_MAX_WRITE_SIZE);
  CHECK(count_words(r.text) == 3000);
  CHECK(mock.stats().streams_completed == 1);
}

TEST_CASE("fetch enforces its body limit", "[net][http_client][integration]") {
  mock_llm_fixture mock;
  asio::io_context io;
  http_client_options options;
  options.max_body_bytes = 1000;
  http_client http(io.get_executor(), options);
  http_client_request req;
  req.method = http_method::post;
  req.url = mock.base_url() + "/chat/completions";
  req.headers = {{"Content-Type", "application/json"}, {"X-Mock-Tokens", "2000"}};
  req.body = R"({"model":"m","messages":[{"role":"user","content":"go"}]})";
  auto r = run_until_done(io, http.fetch(std::move(req)));
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::limit_exceeded);
  CHECK(http.active_transfers() == 0);
}

TEST_CASE("a transfer pinned with resolve entries connects to the given address whatever DNS "
          "says, and reports it",
          "[net][http_client][integration]") {
  mock_llm_fixture mock;
  asio::io_context io;
  http_client http(io.get_executor());
  const auto port = std::to_string(mock.port());
  // `.invalid` never resolves (RFC 6761): only the pin can make this request succeed.
  http_client_request req;
  req.url = "http://pinned.invalid:" + port + "/v1/models";
  req.resolve = {"pinned.invalid:" + port + ":127.0.0.1"};
  req.deadlines.total = 10s;
  auto opened = [](http_client& client, http_client_request r) -> asio::awaitable<std::string> {
    auto stream = co_await client.open(std::move(r));
    if (!stream) {
      co_return "error: " + stream.error().message;
    }
    std::string body;
    for (;;) {
      auto more = co_await stream->read(body);
      if (!more || !*more) {
        break;
      }
    }
    co_return std::to_string(stream->status()) + " " + stream->remote_address();
  };
  CHECK(run_until_done(io, opened(http, req)) == "200 127.0.0.1");

  http_client_request unpinned;
  unpinned.url = "http://unpinned.invalid:" + port + "/v1/models";
  unpinned.deadlines.total = 10s;
  CHECK(run_until_done(io, opened(http, unpinned)).starts_with("error: "));
}

TEST_CASE("an ended transfer's easy handle serves the next request, with none of the last "
          "one's options",
          "[net][http_client][integration]") {
  mock_llm_fixture mock;
  asio::io_context io;
  http_client http(io.get_executor());
  auto chat = [&](std::vector<http_header> extra) {
    http_client_request req;
    req.method = http_method::post;
    req.url = mock.base_url() + "/chat/completions";
    req.headers = {{"Content-Type", "application/json"}};
    for (auto& h : extra) {
      req.headers.push_back(std::move(h));
    }
    req.body = R"({"model":"m","messages":[{"role":"user","content":"go"}]})";
    return req;
  };
  auto answer_words = [](const http_client_response& r) {
    std::vector<stream_event> events;
    (void)decode_openai_completion(r.body, events);
    std::string text;
    for (const auto& e : events) {
      text += e.text;
    }
    return count_words(text);
  };
  // The first request asks the mock for 7 tokens by header; the second, on the same
  // (reset) handle, sends no such header and gets the mock's default of 16.
  auto first = run_until_done(io, http.fetch(chat({{"X-Mock-Tokens", "7"}})));
  REQUIRE(first);
  CHECK(answer_words(*first) == 7);
  auto second = run_until_done(io, http.fetch(chat({})));
  REQUIRE(second);
  CHECK(answer_words(*second) == 16);
  auto models = http_client_request{};
  models.url = mock.base_url() + "/models";
  auto third = run_until_done(io, http.fetch(std::move(models)));
  REQUIRE(third);
  CHECK(third->status == 200);
  CHECK(http.easy_handles_made() == 1);
  // Three at once need three handles: the pooled one and two new ones.
  int ended = 0;
  int succeeded = 0;
  for (int i = 0; i < 3; ++i) {
    asio::co_spawn(io, http.fetch(chat({})),
                   [&](std::exception_ptr e, expected<http_client_response> r) {
                     ++ended;
                     succeeded += !e && r && r->status == 200 ? 1 : 0;
                   });
  }
  while (ended < 3) {
    if (io.stopped()) {
      io.restart();
    }
    io.run_one();
  }
  CHECK(succeeded == 3);
  CHECK(http.easy_handles_made() == 3);
  CHECK(http.active_transfers() == 0);
}
