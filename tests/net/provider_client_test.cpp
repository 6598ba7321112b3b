#include <chrono>
#include <string>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include "mock_llm_fixture.hpp"
#include "support/wait_until.hpp"
#include "troupe/net/provider_client.hpp"

using namespace troupe;
using namespace troupe::net;
using namespace troupe::mock;
using namespace std::chrono_literals;
using troupe::test::count_words;
using troupe::test::mock_llm_fixture;
using troupe::test::run_until_done;
using troupe::test::wait_until;

namespace {

provider_config config_for(const mock_llm_fixture& mock, provider_type type,
                           std::vector<http_header> headers = {}) {
  provider_config c;
  c.type = type;
  c.base_url = mock.base_url();
  c.api_key = "test-key";
  c.extra_headers = std::move(headers);
  c.retry.initial_backoff = 10ms;
  c.retry.max_backoff = 50ms;
  c.deadlines.connect = 2s;
  c.deadlines.first_byte = 10s;
  c.deadlines.idle = 10s;
  c.deadlines.total = 30s;
  return c;
}

completion_request ask(std::string text, bool stream = true) {
  completion_request r;
  r.model = "mock-model";
  r.messages.push_back({chat_role::system, "You are a test.", {}, "", ""});
  r.messages.push_back({chat_role::user, std::move(text), {}, "", ""});
  r.stream = stream;
  return r;
}

struct run_result {
  completion_outcome outcome;
  std::vector<stream_event> events;
};

asio::awaitable<run_result> complete_on(http_client& http, provider_config config,
                                        completion_request request) {
  provider_client client(http, std::move(config));
  run_result r;
  // A named sink: g++ 12 destroys non-trivial temporaries of a co_await expression twice.
  stream_event_sink sink = [&r](const stream_event& e) { r.events.push_back(e); };
  r.outcome = co_await client.complete(std::move(request), std::move(sink));
  co_return r;
}

run_result run(const provider_config& config, completion_request request) {
  asio::io_context io;
  http_client http(io.get_executor());
  return run_until_done(io, complete_on(http, config, std::move(request)));
}

std::size_t count(const std::vector<stream_event>& events, stream_event::kind k) {
  std::size_t n = 0;
  for (const auto& e : events) {
    n += e.type == k ? 1 : 0;
  }
  return n;
}

} // namespace

TEST_CASE("an OpenAI stream from mock-llm arrives token by token with usage",
          "[net][provider][integration]") {
  mock_llm_fixture mock;
  const auto r = run(config_for(mock, provider_type::openai_compatible, {{"X-Mock-Tokens", "20"}}),
                     ask("hello there"));
  INFO((r.outcome.failure ? r.outcome.failure->message : std::string()));
  REQUIRE(r.outcome.ok());
  CHECK(r.outcome.attempts == 1);
  CHECK(count_words(r.outcome.answer.text) == 20);
  CHECK(r.outcome.answer.text.starts_with("mock-llm reply 1 to: hello there"));
  CHECK(count(r.events, stream_event::kind::text_delta) == 20);
  REQUIRE(r.outcome.answer.usage);
  CHECK(r.outcome.answer.usage->completion_tokens == 20);
  CHECK(r.outcome.answer.usage->total_tokens ==
        r.outcome.answer.usage->prompt_tokens + r.outcome.answer.usage->completion_tokens);
  CHECK(*r.outcome.answer.finish == finish_reason::stop);
  CHECK(mock.stats().openai_requests == 1);
}

TEST_CASE("an Anthropic stream from mock-llm decodes to the same answer",
          "[net][provider][integration]") {
  mock_llm_fixture mock;
  const auto r = run(config_for(mock, provider_type::claude,
                                {{"X-Mock-Tokens", "12"}, {"X-Mock-Chunk-Tokens", "5"}}),
                     ask("hi"));
  REQUIRE(r.outcome.ok());
  CHECK(count_words(r.outcome.answer.text) == 12);
  CHECK(count(r.events, stream_event::kind::text_delta) == 3);
  REQUIRE(r.outcome.answer.usage);
  CHECK(r.outcome.answer.usage->completion_tokens == 12);
  CHECK(mock.stats().anthropic_requests == 1);
}

TEST_CASE("whole (non-streamed) answers work on both wires and reuse the connection",
          "[net][provider][integration]") {
  mock_llm_fixture mock;
  asio::io_context io;
  http_client http(io.get_executor());
  for (auto type : {provider_type::openai, provider_type::claude, provider_type::openai}) {
    auto r = run_until_done(
        io, complete_on(http, config_for(mock, type, {{"X-Mock-Tokens", "7"}}), ask("x", false)));
    REQUIRE(r.outcome.ok());
    CHECK(count_words(r.outcome.answer.text) == 7);
    REQUIRE(r.outcome.answer.usage);
    CHECK(r.outcome.answer.usage->completion_tokens == 7);
  }
  // Keep-alive: three requests, one TCP connection.
  CHECK(http.connections_opened() == 1);
}

TEST_CASE("parallel tool calls split into many fragments are joined by index on both wires",
          "[net][provider][integration]") {
  mock_rule rule;
  rule.tool_calls = {{"", "get_weather", R"({"city":"Paris","unit":"celsius"})"},
                     {"", "get_time", R"({"zone":"Europe/Oslo"})"},
                     {"", "search", R"({"query":"tides \"today\"","limit":3})"}};
  rule.knobs.argument_fragment_bytes = 3;
  mock_llm_options options;
  options.rules = {rule};
  mock_llm_fixture mock(options);
  for (auto type : {provider_type::openai_compatible, provider_type::claude}) {
    auto req = ask("weather, time and tides please");
    req.tools = {{"get_weather", "", R"({"type":"object"})"},
                 {"get_time", "", R"({"type":"object"})"},
                 {"search", "", R"({"type":"object"})"}};
    const auto r = run(config_for(mock, type), req);
    REQUIRE(r.outcome.ok());
    REQUIRE(r.outcome.answer.tool_calls.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK(r.outcome.answer.tool_calls[i].name == rule.tool_calls[i].name);
      CHECK(r.outcome.answer.tool_calls[i].arguments == rule.tool_calls[i].arguments);
      CHECK_FALSE(r.outcome.answer.tool_calls[i].id.empty());
    }
    CHECK(count(r.events, stream_event::kind::tool_call_delta) > 20);
    CHECK(count(r.events, stream_event::kind::tool_call_complete) == 3);
    CHECK(*r.outcome.answer.finish == finish_reason::tool_calls);
  }
}

TEST_CASE("mock-llm's default mode calls a tool the user names, then answers its result",
          "[net][provider][integration]") {
  mock_llm_fixture mock;
  auto req = ask("please use get_weather for Paris");
  req.tools = {{"get_weather", "", R"({"type":"object"})"}};
  auto first = run(config_for(mock, provider_type::openai_compatible), req);
  REQUIRE(first.outcome.ok());
  REQUIRE(first.outcome.answer.tool_calls.size() == 1);
  CHECK(first.outcome.answer.tool_calls[0].name == "get_weather");
  CHECK(first.outcome.answer.tool_calls[0].arguments ==
        R"({"query":"please use get_weather for Paris"})");
  req.messages.push_back({chat_role::assistant, "", first.outcome.answer.tool_calls, "", ""});
  req.messages.push_back(
      {chat_role::tool, "sunny", {}, first.outcome.answer.tool_calls[0].id, "get_weather"});
  auto second = run(config_for(mock, provider_type::openai_compatible), req);
  REQUIRE(second.outcome.ok());
  CHECK(second.outcome.answer.tool_calls.empty());
  CHECK_FALSE(second.outcome.answer.text.empty());
}

TEST_CASE("a 429 with retry-after is retried before the first byte and then succeeds",
          "[net][provider][integration][fault]") {
  mock_llm_fixture mock;
  const auto r = run(config_for(mock, provider_type::openai_compatible,
                                {{"X-Mock-Fault", "429:0"}, {"X-Mock-Fault-Until", "2"}}),
                     ask("retry me"));
  REQUIRE(r.outcome.ok());
  CHECK(r.outcome.attempts == 3);
  CHECK(mock.stats().completion_requests == 3);
  CHECK(mock.stats().faults_injected == 2);
  CHECK(r.outcome.answer.text.starts_with("mock-llm reply 3"));
}

TEST_CASE("persistent rate limiting is reported as rate_limited with the retry-after",
          "[net][provider][integration][fault]") {
  mock_llm_fixture mock;
  auto config = config_for(mock, provider_type::claude, {{"X-Mock-Fault", "429:0"}});
  config.retry.max_attempts = 2;
  const auto r = run(config, ask("x"));
  REQUIRE(r.outcome.failure);
  CHECK(r.outcome.failure->kind == provider_failure::rate_limited);
  CHECK(r.outcome.failure->http_status == 429);
  REQUIRE(r.outcome.failure->retry_after);
  CHECK(r.outcome.failure->retry_after->count() == 0);
  CHECK(r.outcome.attempts == 2);
  CHECK(mock.stats().completion_requests == 2);
}

TEST_CASE("retry-after longer than the backoff is honoured, and too long is not waited for",
          "[net][provider]") {
  asio::io_context io;
  http_client http(io.get_executor());
  provider_config config;
  config.base_url = "http://127.0.0.1:9/v1";
  config.retry.initial_backoff = 100ms;
  config.retry.max_retry_after = 10s;
  provider_client client(http, config);
  provider_error e{provider_failure::rate_limited, "", 429, 3s};
  CHECK(client.backoff(1, e) >= 3s);
  e.retry_after = 20s;
  CHECK_FALSE(client.backoff(1, e));
  const provider_error server{provider_failure::server_error, "", 500, std::nullopt};
  const auto first = client.backoff(1, server);
  const auto second = client.backoff(2, server);
  REQUIRE(first);
  REQUIRE(second);
  CHECK(*first >= 80ms);
  CHECK(*first <= 120ms);
  CHECK(*second >= 160ms);
  CHECK(*second <= 240ms);
  CHECK_FALSE(client.backoff(3, server)); // max_attempts 3 reached
  CHECK_FALSE(client.backoff(1, {provider_failure::auth_failed, "", 401, std::nullopt}));
}

TEST_CASE("a 500 is retried up to the bound and reported as server_error",
          "[net][provider][integration][fault]") {
  mock_llm_fixture mock;
  const auto r =
      run(config_for(mock, provider_type::openai_compatible, {{"X-Mock-Fault", "500"}}), ask("x"));
  REQUIRE(r.outcome.failure);
  CHECK(r.outcome.failure->kind == provider_failure::server_error);
  CHECK(r.outcome.attempts == 3);
  CHECK(mock.stats().completion_requests == 3);
}

TEST_CASE("a 401 is reported as auth_failed without a retry",
          "[net][provider][integration][fault]") {
  mock_llm_fixture mock;
  for (auto type : {provider_type::openai_compatible, provider_type::claude}) {
    const auto r = run(config_for(mock, type, {{"X-Mock-Fault", "401"}}), ask("x"));
    REQUIRE(r.outcome.failure);
    CHECK(r.outcome.failure->kind == provider_failure::auth_failed);
    CHECK(r.outcome.attempts == 1);
  }
  CHECK(mock.stats().completion_requests == 2);
}

TEST_CASE("a reset mid-stream is connection_lost, keeps what arrived and is not retried",
          "[net][provider][integration][fault]") {
  mock_llm_fixture mock;
  for (auto type : {provider_type::openai_compatible, provider_type::claude}) {
    const auto r = run(
        config_for(mock, type, {{"X-Mock-Fault", "reset:5"}, {"X-Mock-Tokens", "50"}}), ask("x"));
    REQUIRE(r.outcome.failure);
    CHECK(r.outcome.failure->kind == provider_failure::connection_lost);
    CHECK(r.outcome.attempts == 1);
    CHECK_FALSE(r.outcome.answer.text.empty());
    CHECK(count_words(r.outcome.answer.text) < 50);
    CHECK_FALSE(r.outcome.answer.finish);
  }
}

TEST_CASE("a malformed JSON chunk is malformed_response and keeps the text before it",
          "[net][provider][integration][fault]") {
  mock_llm_fixture mock;
  const auto r = run(config_for(mock, provider_type::openai_compatible,
                                {{"X-Mock-Fault", "malformed:4"}, {"X-Mock-Tokens", "30"}}),
                     ask("x"));
  REQUIRE(r.outcome.failure);
  CHECK(r.outcome.failure->kind == provider_failure::malformed_response);
  CHECK(r.outcome.attempts == 1);
  // Events 1..3 after the role chunk were text: three words.
  CHECK(count_words(r.outcome.answer.text) == 3);
}

TEST_CASE("a stall longer than the idle deadline is a timeout with the partial answer",
          "[net][provider][integration][fault]") {
  mock_llm_fixture mock;
  auto config = config_for(mock, provider_type::claude,
                           {{"X-Mock-Fault", "stall:3000:4"}, {"X-Mock-Tokens", "10"}});
  config.deadlines.idle = 300ms;
  const auto r = run(config, ask("x"));
  REQUIRE(r.outcome.failure);
  CHECK(r.outcome.failure->kind == provider_failure::timeout);
  CHECK(r.outcome.attempts == 1);
  CHECK_FALSE(r.outcome.answer.text.empty());
}

TEST_CASE("a slow first token past the first-byte deadline is a timeout and is retried",
          "[net][provider][integration][fault]") {
  mock_llm_fixture mock;
  auto config = config_for(mock, provider_type::openai_compatible, {{"X-Mock-TTFT-Ms", "3000"}});
  config.deadlines.first_byte = 200ms;
  config.retry.max_attempts = 2;
  const auto r = run(config, ask("x"));
  REQUIRE(r.outcome.failure);
  CHECK(r.outcome.failure->kind == provider_failure::timeout);
  CHECK(r.outcome.attempts == 2);
}

TEST_CASE("a stream without [DONE] but with its finish reason is a complete answer",
          "[net][provider][integration][fault]") {
  mock_llm_fixture mock;
  for (auto type : {provider_type::openai_compatible, provider_type::claude}) {
    const auto r = run(
        config_for(mock, type, {{"X-Mock-Fault", "no-done"}, {"X-Mock-Tokens", "6"}}), ask("x"));
    REQUIRE(r.outcome.ok());
    CHECK(count_words(r.outcome.answer.text) == 6);
    REQUIRE(r.outcome.answer.usage);
    CHECK(r.outcome.answer.usage->completion_tokens == 6);
  }
}

TEST_CASE("data lines split at arbitrary byte boundaries decode to the same answer",
          "[net][provider][integration][fault]") {
  mock_llm_fixture mock;
  for (auto type : {provider_type::openai_compatible, provider_type::claude}) {
    const auto r =
        run(config_for(mock, type, {{"X-Mock-Fault", "split:5"}, {"X-Mock-Tokens", "8"}}),
            ask("split me"));
    REQUIRE(r.outcome.ok());
    CHECK(r.outcome.answer.text.starts_with("mock-llm reply "));
    CHECK(r.outcome.answer.text.find(" to: split me") != std::string::npos);
    CHECK(count_words(r.outcome.answer.text) == 8);
  }
}

TEST_CASE("max_tokens cuts the answer and is reported as truncated",
          "[net][provider][integration]") {
  mock_llm_fixture mock;
  for (auto type : {provider_type::openai_compatible, provider_type::claude}) {
    auto req = ask("x");
    req.max_tokens = 5;
    const auto r = run(config_for(mock, type, {{"X-Mock-Tokens", "40"}}), req);
    REQUIRE(r.outcome.failure);
    CHECK(r.outcome.failure->kind == provider_failure::truncated);
    CHECK(count_words(r.outcome.answer.text) == 5);
    CHECK(*r.outcome.answer.finish == finish_reason::length);
  }
}

TEST_CASE("a filtered answer is reported as content_filtered", "[net][provider][integration]") {
  mock_rule rule;
  rule.user_contains = "forbidden";
  rule.text = "I cannot";
  rule.finish = finish_reason::content_filter;
  mock_llm_options options;
  options.rules = {rule};
  mock_llm_fixture mock(options);
  for (auto type : {provider_type::openai_compatible, provider_type::claude}) {
    const auto r = run(config_for(mock, type), ask("something forbidden"));
    REQUIRE(r.outcome.failure);
    CHECK(r.outcome.failure->kind == provider_failure::content_filtered);
    CHECK(r.outcome.answer.text == "I cannot");
  }
}

TEST_CASE("a refused connection is connection_lost after bounded retries", "[net][provider]") {
  asio::io_context io;
  http_client http(io.get_executor());
  provider_config config;
  config.type = provider_type::openai_compatible;
  config.base_url = "http://127.0.0.1:1/v1";
  config.retry.initial_backoff = 5ms;
  config.retry.max_attempts = 2;
  const auto r = run_until_done(io, complete_on(http, config, ask("x")));
  REQUIRE(r.outcome.failure);
  CHECK(r.outcome.failure->kind == provider_failure::connection_lost);
  CHECK(r.outcome.attempts == 2);
}

namespace {

asio::awaitable<bool> sleep_then_true(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  t.expires_after(d);
  co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
  co_return true;
}

/// True once the mock has started streaming an answer (polled every 5 ms), false after
/// `limit`: the cancellation below must land mid-stream however slowly the request got
/// there (a fixed 300 ms lost that race under ASan on a loaded machine).
asio::awaitable<bool> until_stream_started(const mock_llm_fixture* mock,
                                           std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (mock->stats().streams_started == 0 && std::chrono::steady_clock::now() < deadline) {
    co_await sleep_then_true(5ms);
  }
  co_return mock->stats().streams_started > 0;
}

asio::awaitable<int> cancel_mid_stream(http_client& http, provider_config config,
                                       const mock_llm_fixture* mock) {
  using namespace asio::experimental::awaitable_operators;
  provider_client client(http, std::move(config));
  auto winner = co_await (client.complete(ask("long")) || until_stream_started(mock, 30s));
  co_return static_cast<int>(winner.index());
}

asio::awaitable<std::size_t> read_some_then_drop(http_client& http, std::string url) {
  http_client_request req;
  req.method = http_method::post;
  req.url = std::move(url);
  req.headers = {{"Content-Type", "application/json"},
                 {"X-Mock-Token-Delay-Ms", "20"},
                 {"X-Mock-Tokens", "10000"}};
  req.body = R"({"model":"m","stream":true,"messages":[{"role":"user","content":"go"}]})";
  auto stream = co_await http.open(std::move(req));
  if (!stream) {
    co_return 0;
  }
  std::string got;
  while (got.size() < 500) {
    auto more = co_await stream->read(got);
    if (!more || !*more) {
      break;
    }
  }
  co_return got.size();
  // `stream` is destroyed here: the transfer ends.
}

} // namespace

TEST_CASE("cancelling a stream mid-flight releases its connection",
          "[net][provider][integration]") {
  mock_llm_fixture mock;
  asio::io_context io;
  http_client http(io.get_executor());

  SECTION("by cancelling the awaiting coroutine") {
    auto config = config_for(mock, provider_type::openai_compatible,
                             {{"X-Mock-Token-Delay-Ms", "20"}, {"X-Mock-Tokens", "10000"}});
    const int winner = run_until_done(io, cancel_mid_stream(http, config, &mock));
    CHECK(winner == 1); // the stream started and the completion was cancelled mid-flight
  }
  SECTION("by dropping the stream") {
    const auto got =
        run_until_done(io, read_some_then_drop(http, mock.base_url() + "/chat/completions"));
    CHECK(got >= 500);
  }
  CHECK(http.active_transfers() == 0);
  CHECK(mock.stats().streams_started == 1);
  // The server sees the client leave and closes the connection and its stream.
  CHECK(wait_until(
      [&] {
        const auto s = mock.stats();
        return s.open_connections == 0 && s.active_streams == 0 && s.streams_abandoned == 1;
      },
      3s));
  CHECK(mock.stats().streams_completed == 0);
}

TEST_CASE("remote models are listed from GET /models", "[net][provider][integration]") {
  mock_llm_fixture mock;
  asio::io_context io;
  http_client http(io.get_executor());
  provider_client client(http, config_for(mock, provider_type::openai_compatible));
  auto models = run_until_done(io, client.list_models());
  REQUIRE(models);
  CHECK(*models == std::vector<std::string>{"mock-llm"});
}

TEST_CASE("mock-llm scripts match on user text, tool results and call number", "[net][mock]") {
  auto rules = parse_mock_script(R"(
# JSONL: one rule per line
{"match":{"call":1},"fault":"500"}
{"match":{"user":"weather","has_tool_result":false},"reply":{"tool_calls":[{"name":"get_weather","arguments":{"city":"Oslo"}}]}}
{"match":{"has_tool_result":true},"reply":{"text":"It is sunny in Oslo."},"tokens":3}
)");
  REQUIRE(rules);
  REQUIRE(rules->size() == 3);
  CHECK(rules->at(0).fault.type == mock_fault::kind::server_error);
  CHECK(rules->at(1).tool_calls.at(0).arguments == R"({"city":"Oslo"})");
  CHECK(*rules->at(2).knobs.tokens == 3);

  mock_llm_options options;
  options.rules = std::move(*rules);
  mock_llm_fixture mock(options);
  auto req = ask("what is the weather?");
  req.tools = {{"get_weather", "", R"({"type":"object"})"}};
  auto first = run(config_for(mock, provider_type::openai_compatible), req);
  REQUIRE(first.outcome.ok());
  CHECK(first.outcome.attempts == 2); // call 1 was the scripted 500
  REQUIRE(first.outcome.answer.tool_calls.size() == 1);
  req.messages.push_back({chat_role::assistant, "", first.outcome.answer.tool_calls, "", ""});
  req.messages.push_back({chat_role::tool, "sunny", {}, first.outcome.answer.tool_calls[0].id, ""});
  auto second = run(config_for(mock, provider_type::claude), req);
  REQUIRE(second.outcome.ok());
  CHECK(second.outcome.answer.text == "It is sunny in Oslo.");

  CHECK_FALSE(parse_mock_script(R"([{"fault":"explode"}])"));
  CHECK(parse_mock_script(R"({"rules":[{"reply":{"text":"a"}}]})"));
}

TEST_CASE("a mock-llm script names a finish reason with OpenAI's four words and no other",
          "[net][mock]") {
  const auto finish_of = [](std::string_view word) {
    return parse_mock_script(R"([{"reply":{"text":"a","finish_reason":")" + std::string(word) +
                             R"("}}])");
  };
  for (const auto& [word, reason] : std::vector<std::pair<std::string_view, finish_reason>>{
           {"stop", finish_reason::stop},
           {"length", finish_reason::length},
           {"tool_calls", finish_reason::tool_calls},
           {"content_filter", finish_reason::content_filter}}) {
    const auto rules = finish_of(word);
    REQUIRE(rules);
    CHECK(rules->at(0).finish == reason);
  }
  for (const auto word : {"other", "function_call", "end_turn", "done"}) {
    const auto rules = finish_of(word);
    REQUIRE_FALSE(rules);
    CHECK(rules.error().message == "unknown finish_reason '" + std::string(word) + "'");
  }
}

TEST_CASE("mock-llm draws random faults at the given rate, repeatably for a seed", "[net][mock]") {
  auto faults = parse_mock_fault_list("429,500,reset:2,stall:5:1,malformed,no-done");
  REQUIRE(faults);
  REQUIRE(faults->size() == 6);
  CHECK(faults->at(2).type == mock_fault::kind::reset);
  CHECK(faults->at(3).stall_ms == 5);
  CHECK_FALSE(parse_mock_fault_list("429,explode"));

  // About 5% of 20,000 calls, every kind among them, the same calls for the same seed.
  std::vector<std::size_t> per_kind(9, 0);
  std::size_t drawn = 0;
  for (std::uint64_t call = 1; call <= 20'000; ++call) {
    const auto f = draw_mock_fault(*faults, 0.05, 7, call);
    CHECK(f.type == draw_mock_fault(*faults, 0.05, 7, call).type);
    if (f.type != mock_fault::kind::none) {
      ++drawn;
      ++per_kind[static_cast<std::size_t>(f.type)];
    }
  }
  CHECK(drawn > 800);
  CHECK(drawn < 1'200);
  for (const auto& f : *faults) {
    CHECK(per_kind[static_cast<std::size_t>(f.type)] > 100);
  }
  CHECK(draw_mock_fault(*faults, 0, 7, 1).type == mock_fault::kind::none);
  CHECK(draw_mock_fault({}, 1, 7, 1).type == mock_fault::kind::none);
  CHECK(draw_mock_fault(*faults, 1, 7, 1).type != mock_fault::kind::none);

  // Served: at rate 1 every call without a fault of its own fails; a 500 is retried.
  mock_llm_options options;
  options.random_faults = {faults->at(1)};
  options.random_fault_rate = 1;
  mock_llm_fixture mock(options);
  const auto r = run(config_for(mock, provider_type::openai_compatible), ask("x"));
  REQUIRE(r.outcome.failure);
  CHECK(r.outcome.failure->kind == provider_failure::server_error);
  CHECK(mock.stats().faults_injected == r.outcome.attempts);
  CHECK(r.outcome.attempts == 3);
}
