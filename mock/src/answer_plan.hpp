#pragma once

/// \file
/// What mock-llm answers: the request as the mock reads it, the rule it matches, and the
/// plan of the answer (text cut into chunks, tool calls, finish reason, token counts),
/// independent of the wire it is written in. Private to troupe_mock.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/mock/mock_llm_server.hpp"
#include "troupe/net/http_message.hpp"
#include "troupe/net/provider_wire.hpp"

namespace troupe::mock::detail {

/// The parts of a completion request (either wire) that rules and plans look at.
struct parsed_request {
  std::string model;
  bool stream = false;
  bool include_usage = false;
  std::optional<std::uint64_t> max_tokens;
  std::string last_user;
  /// Every message's text, joined by newlines (for `prompt` matches).
  std::string all_text;
  bool has_tool_result = false;
  std::vector<std::string> tool_names;
  std::size_t prompt_chars = 0;
};

/// Reads an OpenAI or Anthropic request body.
expected<parsed_request> parse_request(std::string_view body);

/// The first rule of `options` that matches the request and call number, or null.
const mock_rule* find_rule(const mock_llm_options& options, const parsed_request& r,
                           std::uint64_t call);

/// A knob's value: the request header when it holds a number, else the rule's, else
/// `fallback`.
unsigned knob(const net::http_request& req, std::string_view header,
              std::optional<unsigned> rule_value, unsigned fallback);

/// Everything needed to write one answer.
struct answer_plan {
  net::wire_format format = net::wire_format::openai;
  std::string model;
  std::uint64_t call = 0;
  bool include_usage = false;
  std::string text;
  std::vector<std::size_t> chunk_ends; // end offsets of the text chunks
  std::vector<tool_call> calls;
  finish_reason finish = finish_reason::stop;
  std::uint64_t prompt_tokens = 0;
  std::uint64_t completion_tokens = 0;
  unsigned fragment_bytes = 8;
};

/// Plans the answer to call number `call` of the server.
answer_plan make_plan(const mock_llm_options& options, const parsed_request& r,
                      const mock_rule* rule, const net::http_request& req, net::wire_format format,
                      std::uint64_t call);

} // namespace troupe::mock::detail
