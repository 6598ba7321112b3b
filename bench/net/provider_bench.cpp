// Provider I/O benchmarks: SSE parse + decode of one OpenAI chunk, and relay throughput
// of many concurrent streams from mock-llm through the libcurl-multi client.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <simdjson.h>

#include "troupe/mock/mock_llm_server.hpp"
#include "troupe/net/provider_client.hpp"
#include "troupe/net/provider_wire.hpp"
#include "troupe/net/sse_parser.hpp"

namespace asio = boost::asio;
using namespace troupe;
using namespace troupe::net;
using namespace troupe::mock;

namespace {

// A ~300-byte chat.completion.chunk as OpenAI sends it.
const std::string openai_chunk =
    R"(data: {"id":"chatcmpl-AbCdEfGhIjKlMnOpQrStUvWxYz012","object":"chat.completion.chunk","created":1732000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,"delta":{"content":" quick brown"},"logprobs":null,"finish_reason":null}],"usage":null})"
    "\n\n";

void BM_sse_parse_decode_openai_chunk(benchmark::State& state) {
  sse_parser parser;
  openai_stream_decoder decoder;
  std::vector<stream_event> events;
  events.reserve(8);
  std::size_t text_bytes = 0;
  for (auto _ : state) {
    events.clear();
    auto ok = parser.feed(openai_chunk, [&](const sse_message& m) {
      if (!decoder.decode(m.data, events)) {
        state.SkipWithError("decode failed");
      }
    });
    if (!ok || events.size() != 1) {
      state.SkipWithError("unexpected parse result");
      break;
    }
    text_bytes += events.front().text.size();
  }
  benchmark::DoNotOptimize(text_bytes);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * openai_chunk.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.SetLabel(std::string("chunk ") + std::to_string(openai_chunk.size()) + " B, simdjson " +
                 std::string(json_kernel_name()));
}
BENCHMARK(BM_sse_parse_decode_openai_chunk);

// mock-llm on its own io thread.
struct mock_thread {
  explicit mock_thread(mock_llm_options options) {
    options.server.max_connections = 100'000;
    server = std::make_unique<mock_llm_server>(io, std::move(options));
    port = server->listen({"127.0.0.1", 0}).value().port;
    server->start();
    thread = std::thread([this] { io.run(); });
  }
  ~mock_thread() {
    asio::post(io, [this] { server->stop(std::chrono::milliseconds(100), [this] { io.stop(); }); });
    thread.join();
  }
  asio::io_context io;
  std::unique_ptr<mock_llm_server> server;
  std::thread thread;
  std::uint16_t port = 0;
};

asio::awaitable<void> one_stream(provider_client& client, std::shared_ptr<std::size_t> chunks,
                                 std::shared_ptr<std::size_t> failures,
                                 std::shared_ptr<std::size_t> remaining) {
  completion_request request;
  request.model = "mock";
  request.messages.push_back({chat_role::user, "relay", {}, "", ""});
  // A named sink: g++ 12 destroys non-trivial temporaries of a co_await expression twice.
  stream_event_sink sink = [chunks](const stream_event& e) {
    if (e.type == stream_event::kind::text_delta) {
      ++*chunks;
    }
  };
  auto outcome = co_await client.complete(std::move(request), std::move(sink));
  if (!outcome.ok()) {
    ++*failures;
  }
  --*remaining;
}

// N concurrent streams of T tokens (one token per SSE chunk, D ms apart) from mock-llm
// (on its own io thread) through one http_client on one io thread, decoded into
// normalized events.
void BM_relay_concurrent_streams(benchmark::State& state) {
  const auto streams = static_cast<std::size_t>(state.range(0));
  const auto tokens = static_cast<unsigned>(state.range(1));
  mock_llm_options options;
  options.tokens = tokens;
  // With a delay between tokens every SSE event leaves mock-llm in its own write; without,
  // mock-llm coalesces events into writes of up to 4 KiB.
  options.token_delay_ms = static_cast<unsigned>(state.range(2));
  mock_thread mock(options);
  asio::io_context io;
  http_client http(io.get_executor());
  provider_config config;
  config.type = provider_type::openai_compatible;
  config.base_url = "http://127.0.0.1:" + std::to_string(mock.port) + "/v1";
  config.retry.max_attempts = 1;
  provider_client client(http, config);
  std::size_t total_chunks = 0;
  std::size_t total_failures = 0;
  for (auto _ : state) {
    auto chunks = std::make_shared<std::size_t>(0);
    auto failures = std::make_shared<std::size_t>(0);
    auto remaining = std::make_shared<std::size_t>(streams);
    for (std::size_t i = 0; i < streams; ++i) {
      asio::co_spawn(io, one_stream(client, chunks, failures, remaining), asio::detached);
    }
    while (*remaining > 0) {
      if (io.stopped()) {
        io.restart();
      }
      io.run_one();
    }
    total_chunks += *chunks;
    total_failures += *failures;
  }
  if (total_failures > 0) {
    state.SkipWithError("some streams failed");
  }
  state.counters["chunks_per_s"] =
      benchmark::Counter(static_cast<double>(total_chunks), benchmark::Counter::kIsRate);
  state.counters["streams"] = static_cast<double>(streams);
  state.SetLabel(std::string("simdjson ") + std::string(json_kernel_name()));
}
BENCHMARK(BM_relay_concurrent_streams)
    ->Args({500, 200, 0})
    ->Args({500, 200, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

} // namespace
