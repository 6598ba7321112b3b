#pragma once

/// \file
/// mock-llm: a MOCK model server for tests, demos and benchmarks. It speaks the OpenAI
/// Chat Completions (`POST /v1/chat/completions`) and Anthropic Messages
/// (`POST /v1/messages`) wire formats over real HTTP, streamed or whole, and answers from
/// a script of rules or deterministically. It is not a model: its answers are canned.
///
/// Behaviour per request comes from the first matching rule (last user message
/// containing a pattern, a tool result present or not, the call number), else from the
/// default mode: when the request offers tools, has no tool result yet and the last user
/// message names one of the tools, it calls that tool with `{"query": <message>}`;
/// otherwise it answers "mock-llm reply …" padded with filler words to the token count.
///
/// Knobs (per rule, or per request with headers that win over the rule):
/// `X-Mock-Tokens` words per answer, `X-Mock-TTFT-Ms` time to first token,
/// `X-Mock-Token-Delay-Ms` delay between chunks, `X-Mock-Chunk-Tokens` words per chunk.
/// Faults (`X-Mock-Fault`, or a rule's `fault`): `429[:SECONDS]` (with retry-after),
/// `500`, `401`, `reset[:N]` (TCP reset after N chunks), `malformed[:N]` (a broken JSON
/// chunk after N chunks), `stall:MS[:N]` (silence of MS ms after N chunks), `no-done`
/// (the stream ends without [DONE] / message_stop), `split[:BYTES]` (every line written
/// in pieces of BYTES bytes). `X-Mock-Fault-Until: K` applies the fault only while the
/// server's call number is at most K (e.g. "fail twice, then answer"). Faults can also
/// be drawn at random for a share of the calls (`mock_llm_options::random_faults`).
///
/// `GET /_mock/stats` reports request counts and open connections as JSON;
/// `GET /v1/models` lists the mock model.
///
/// Every answer is written with troupe_net's wire encoders (wire_encode.hpp), the
/// counterparts of the decoders troupe reads providers with: the mock cannot speak a
/// dialect of its own. The library is split by subject: script.hpp (rules, knobs,
/// faults), src/answer_plan (what to answer), src/answer_encoding (the answer as wire
/// events and bodies), src/mock_llm_server.cpp (routes, pacing, faults, counters).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "troupe/mock/script.hpp"
#include "troupe/net/http_server.hpp"
#include "troupe/runtime/error.hpp"
#include "troupe/runtime/metrics.hpp"
#include "troupe/runtime/settings.hpp"

namespace troupe::mock {

/// Server configuration.
struct mock_llm_options {
  std::vector<mock_rule> rules;
  /// Defaults when neither header nor rule sets a knob.
  unsigned tokens = 16;
  unsigned ttft_ms = 0;
  unsigned token_delay_ms = 0;
  unsigned chunk_tokens = 1;
  unsigned argument_fragment_bytes = 8;
  std::string model = "mock-llm";
  /// Faults drawn at random: a completion request that has no fault of its own (from its
  /// rule or its `X-Mock-Fault` header) gets one of `random_faults`, chosen uniformly,
  /// with probability `random_fault_rate` (0 to 1). The draw for a call number depends
  /// only on it and `random_fault_seed`, so a seed repeats the same faults in call order.
  std::vector<mock_fault> random_faults;
  double random_fault_rate = 0;
  std::uint64_t random_fault_seed = 1;
  net::http_server_options server;
  /// Tests: called with every completion request's body as it arrives (what the model
  /// received), on the server's threads.
  std::function<void(const std::string& body)> observe;
};

/// Counters for test assertions (also served at GET /_mock/stats).
struct mock_llm_stats {
  std::uint64_t requests = 0;
  std::uint64_t completion_requests = 0;
  std::uint64_t openai_requests = 0;
  std::uint64_t anthropic_requests = 0;
  std::uint64_t faults_injected = 0;
  std::uint64_t streams_started = 0;
  std::uint64_t streams_completed = 0;
  /// Streams the client left before the end (cancelled, timed out, crashed).
  std::uint64_t streams_abandoned = 0;
  std::uint64_t chunks_sent = 0;
  std::size_t active_streams = 0;
  std::size_t open_connections = 0;
};

/// The mock server. Runs on the io_context it is given (any number of threads).
class mock_llm_server {
public:
  mock_llm_server(boost::asio::io_context& io, mock_llm_options options);
  ~mock_llm_server();
  mock_llm_server(const mock_llm_server&) = delete;
  mock_llm_server& operator=(const mock_llm_server&) = delete;

  /// Binds; returns the bound address (the real port when 0 was asked).
  expected<endpoint> listen(const endpoint& where);
  void start();
  void stop(std::chrono::milliseconds grace, std::function<void()> done);

  /// Thread-safe.
  mock_llm_stats stats() const;
  std::string stats_json() const;

  struct state;

private:
  std::shared_ptr<state> state_;
  std::unique_ptr<metrics_registry> metrics_;
  std::unique_ptr<net::http_server> server_;
};

} // namespace troupe::mock
