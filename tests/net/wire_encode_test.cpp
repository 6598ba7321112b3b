#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "troupe/net/provider_wire.hpp"
#include "troupe/net/sse_parser.hpp"
#include "troupe/net/wire_encode.hpp"

using namespace troupe;
using namespace troupe::net;

namespace {

/// One normalized event as a line of text, so that sequences compare with readable
/// failures.
std::string describe(const stream_event& e) {
  switch (e.type) {
    case stream_event::kind::text_delta:
      return "text " + e.text;
    case stream_event::kind::reasoning_delta:
      return "reasoning " + e.text;
    case stream_event::kind::tool_call_start:
      return fmt::format("start {} {} {}", e.index, e.id, e.name);
    case stream_event::kind::tool_call_delta:
      return fmt::format("delta {} {}", e.index, e.text);
    case stream_event::kind::tool_call_complete:
      return fmt::format("complete {} {} {} {}", e.index, e.id, e.name, e.text);
    case stream_event::kind::usage:
      return fmt::format("usage {} {} {}", e.usage.prompt_tokens, e.usage.completion_tokens,
                         e.usage.total_tokens);
    case stream_event::kind::finish:
      return fmt::format("finish {}", to_string(e.reason));
  }
  return "?";
}

struct decoded_stream {
  std::vector<std::string> events;
  completion answer;
  bool done = false;
};

/// Runs an encoded stream through troupe's SSE parser and the wire's stream decoder.
decoded_stream decode_stream(const std::string& wire_text, wire_format wire) {
  sse_parser parser;
  openai_stream_decoder openai;
  anthropic_stream_decoder anthropic;
  completion_builder builder;
  decoded_stream out;
  auto ok = parser.feed(wire_text, [&](const sse_message& m) {
    std::vector<stream_event> events;
    auto r = wire == wire_format::openai ? openai.decode(m.data, events)
                                         : anthropic.decode(m.event, m.data, events);
    REQUIRE(r);
    for (const auto& e : events) {
      builder.apply(e);
      out.events.push_back(describe(e));
    }
  });
  REQUIRE(ok);
  out.done = wire == wire_format::openai ? openai.done() : anthropic.done();
  out.answer = std::move(builder).result();
  return out;
}

completion decode_whole(const std::string& body, wire_format wire) {
  std::vector<stream_event> events;
  auto r = wire == wire_format::openai ? decode_openai_completion(body, events)
                                       : decode_anthropic_message(body, events);
  REQUIRE(r);
  completion_builder builder;
  for (const auto& e : events) {
    builder.apply(e);
  }
  return std::move(builder).result();
}

const openai_answer_identity openai_id{"chatcmpl-7", "gpt-test", 1'700'000'000};
const anthropic_message_identity anthropic_id{"msg_7", "claude-test"};

completion sample_answer() {
  completion c;
  c.text = "Hello \"world\"\n";
  c.reasoning = "think first";
  c.tool_calls = {{"call_a", "lookup", R"({"x":1})"}, {"call_b", "search", R"({"q":"y"})"}};
  c.usage = token_usage{3, 5, 8};
  c.finish = finish_reason::tool_calls;
  return c;
}

/// Checks that `got` carries everything `want` does: text, reasoning, tool calls, usage and
/// finish reason.
void check_same_answer(const completion& got, const completion& want) {
  CHECK(got.text == want.text);
  CHECK(got.reasoning == want.reasoning);
  CHECK(got.tool_calls == want.tool_calls);
  CHECK(got.usage == want.usage);
  CHECK(got.finish == want.finish);
}

} // namespace

TEST_CASE("an encoded OpenAI stream decodes to the events it was written from, tool-call "
          "fragments and usage included",
          "[net][wire]") {
  std::string s;
  s += openai_chunk_event(openai_id, {.role = true, .content = ""});
  s += openai_chunk_event(openai_id, {.reasoning = "think first"});
  s += openai_chunk_event(openai_id, {.content = "Hello "});
  s += openai_chunk_event(openai_id, {.content = "\"world\"\n"});
  s += openai_chunk_event(openai_id, {.tool_calls = {{0, "call_a", "lookup", ""}}});
  s += openai_chunk_event(openai_id, {.tool_calls = {{1, "call_b", "search", R"({"q")"}}});
  s += openai_chunk_event(openai_id, {.tool_calls = {{0, "", "", R"({"x":1})"}}});
  s += openai_chunk_event(openai_id, {.tool_calls = {{1, "", "", R"(:"y"})"}}});
  s += openai_chunk_event(openai_id, {.finish = finish_reason::tool_calls});
  s += openai_chunk_event(openai_id, {.usage = token_usage{3, 5, 0}});
  s += openai_done_event();

  const auto got = decode_stream(s, wire_format::openai);
  const std::vector<std::string> expected = {
      "reasoning think first",
      "text Hello ",
      "text \"world\"\n",
      "start 0 call_a lookup",
      "start 1 call_b search",
      R"(delta 1 {"q")",
      R"(delta 0 {"x":1})",
      R"(delta 1 :"y"})",
      R"(complete 0 call_a lookup {"x":1})",
      R"(complete 1 call_b search {"q":"y"})",
      "finish tool_calls",
      "usage 3 5 8",
  };
  CHECK(got.events == expected);
  CHECK(got.done);
  check_same_answer(got.answer, sample_answer());
}

TEST_CASE("an OpenAI chunk carries several tool-call fragments and vendor extensions at once",
          "[net][wire]") {
  openai_chunk both;
  both.tool_calls = {{0, "call_a", "lookup", "{}"}, {1, "call_b", "search", "{}"}};
  both.extensions = {{"troupe", R"({"correction":true})"}};
  const auto json = encode_openai_chunk(openai_id, both);
  CHECK(json.find(R"("troupe":{"correction":true})") != std::string::npos);
  const auto got = decode_stream(sse_data_event(json) + openai_done_event(), wire_format::openai);
  const std::vector<std::string> expected = {
      "start 0 call_a lookup",       "delta 0 {}",
      "start 1 call_b search",       "delta 1 {}",
      "complete 0 call_a lookup {}", "complete 1 call_b search {}",
  };
  CHECK(got.events == expected);
}

TEST_CASE("an OpenAI usage chunk has no choice and open chunks a null finish reason",
          "[net][wire]") {
  const auto usage = encode_openai_chunk(openai_id, {.usage = token_usage{1, 2, 3}});
  CHECK(usage.find(R"("choices":[])") != std::string::npos);
  CHECK(usage.find(R"("object":"chat.completion.chunk")") != std::string::npos);
  const auto open = encode_openai_chunk(openai_id, {.content = "x"});
  CHECK(open.find(R"("finish_reason":null)") != std::string::npos);
  CHECK(open.find(R"("id":"chatcmpl-7")") != std::string::npos);
  CHECK(open.find(R"("model":"gpt-test")") != std::string::npos);
}

TEST_CASE("an encoded Anthropic stream decodes to the events it was written from, tool input "
          "fragments and cumulative usage included",
          "[net][wire]") {
  std::string s;
  s += anthropic_message_start_event(anthropic_id, token_usage{3, 1, 0});
  s += anthropic_thinking_block_start_event(0);
  s += anthropic_thinking_delta_event(0, "think first");
  s += anthropic_block_stop_event(0);
  s += anthropic_text_block_start_event(1);
  s += anthropic_text_delta_event(1, "Hello ");
  s += anthropic_text_delta_event(1, "\"world\"\n");
  s += anthropic_block_stop_event(1);
  s += anthropic_tool_use_block_start_event(2, "call_a", "lookup");
  s += anthropic_input_json_delta_event(2, R"({"x")");
  s += anthropic_input_json_delta_event(2, ":1}");
  s += anthropic_block_stop_event(2);
  s += anthropic_tool_use_block_start_event(3, "call_b", "search");
  s += anthropic_input_json_delta_event(3, R"({"q":"y"})");
  s += anthropic_block_stop_event(3);
  s += anthropic_message_delta_event(finish_reason::tool_calls, 5);
  s += anthropic_message_stop_event();

  const auto got = decode_stream(s, wire_format::anthropic);
  const std::vector<std::string> expected = {
      "usage 3 1 4",
      "reasoning think first",
      "text Hello ",
      "text \"world\"\n",
      "start 2 call_a lookup",
      R"(delta 2 {"x")",
      "delta 2 :1}",
      R"(complete 2 call_a lookup {"x":1})",
      "start 3 call_b search",
      R"(delta 3 {"q":"y"})",
      R"(complete 3 call_b search {"q":"y"})",
      "usage 3 5 8",
      "finish tool_calls",
  };
  CHECK(got.events == expected);
  CHECK(got.done);
  check_same_answer(got.answer, sample_answer());
}

TEST_CASE("whole answers encoded on either wire decode back to the same completion",
          "[net][wire]") {
  const auto want = sample_answer();
  for (const auto wire : {wire_format::openai, wire_format::anthropic}) {
    const auto body = wire == wire_format::openai ? encode_openai_completion(openai_id, want)
                                                  : encode_anthropic_message(anthropic_id, want);
    check_same_answer(decode_whole(body, wire), want);
  }
}

TEST_CASE("a whole answer without text or tool calls keeps its finish reason on both wires",
          "[net][wire]") {
  completion cut;
  cut.text = "partial";
  cut.finish = finish_reason::length;
  cut.usage = token_usage{10, 1, 11};
  CHECK(decode_whole(encode_openai_completion(openai_id, cut), wire_format::openai).finish ==
        finish_reason::length);
  CHECK(decode_whole(encode_anthropic_message(anthropic_id, cut), wire_format::anthropic).finish ==
        finish_reason::length);
  completion empty;
  const auto body = encode_openai_completion(openai_id, empty);
  CHECK(body.find(R"("content":null)") != std::string::npos);
  CHECK(decode_whole(body, wire_format::openai).finish == finish_reason::stop);
}

TEST_CASE("every finish reason survives its wire's word and back", "[net][wire]") {
  for (const auto r : {finish_reason::stop, finish_reason::length, finish_reason::tool_calls,
                       finish_reason::content_filter, finish_reason::other}) {
    CHECK(parse_openai_finish(openai_finish_word(r)) == r);
    CHECK(parse_anthropic_stop(anthropic_stop_word(r)) == r);
  }
  CHECK(anthropic_stop_word(finish_reason::stop) == "end_turn");
  CHECK(anthropic_stop_word(finish_reason::length) == "max_tokens");
  CHECK(openai_finish_word(finish_reason::content_filter) == "content_filter");
}

TEST_CASE("encoded error objects are classified like the providers' own", "[net][wire]") {
  const auto limited =
      classify_http_error(429, encode_openai_error("rate_limit_error", "slow down"), "2");
  CHECK(limited.kind == provider_failure::rate_limited);
  CHECK(limited.message == "HTTP 429: slow down");
  const auto overloaded =
      classify_http_error(529, encode_anthropic_error("overloaded_error", "busy"), "");
  CHECK(overloaded.kind == provider_failure::server_error);
  CHECK(overloaded.message == "HTTP 529: busy");

  std::vector<stream_event> events;
  openai_stream_decoder openai;
  const auto in_stream = openai.decode(encode_openai_error("server_error", "boom"), events);
  REQUIRE_FALSE(in_stream);
  CHECK(in_stream.error().kind == provider_failure::server_error);
  CHECK(in_stream.error().message == "error in stream: boom");

  sse_parser parser;
  anthropic_stream_decoder anthropic;
  bool failed = false;
  REQUIRE(parser.feed(anthropic_error_event("overloaded_error", "busy"), [&](const sse_message& m) {
    auto r = anthropic.decode(m.event, m.data, events);
    failed = !r && r.error().kind == provider_failure::server_error;
  }));
  CHECK(failed);
}

TEST_CASE("an encoded model list reads back as the same ids", "[net][wire]") {
  const auto ids = parse_model_list(encode_model_list({"gpt-a", "claude-b"}, "tester"));
  REQUIRE(ids);
  CHECK(*ids == std::vector<std::string>{"gpt-a", "claude-b"});
  CHECK(parse_model_list(encode_model_list({}, "tester")).value().empty());
}
