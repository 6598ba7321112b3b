#include "answer_encoding.hpp"

#include <ctime>
#include <utility>

#include "troupe/net/wire_encode.hpp"

namespace troupe::mock::detail {

namespace {

std::string_view text_chunk(const answer_plan& p, std::size_t i) {
  const std::size_t begin = i == 0 ? 0 : p.chunk_ends[i - 1];
  return std::string_view(p.text).substr(begin, p.chunk_ends[i] - begin);
}

/// Argument fragments of every call, round-robin across calls when `interleave` so that
/// parallel calls interleave on the wire (OpenAI; Anthropic blocks are sequential).
std::vector<std::pair<std::size_t, std::string_view>> fragments(const answer_plan& p,
                                                                bool interleave) {
  std::vector<std::pair<std::size_t, std::string_view>> out;
  std::vector<std::size_t> at(p.calls.size(), 0);
  bool more = true;
  while (more) {
    more = false;
    for (std::size_t c = 0; c < p.calls.size(); ++c) {
      const auto& args = p.calls[c].arguments;
      while (at[c] < args.size()) {
        out.emplace_back(c, std::string_view(args).substr(at[c], p.fragment_bytes));
        at[c] += p.fragment_bytes;
        more = true;
        if (interleave) {
          break;
        }
      }
    }
  }
  return out;
}

token_usage usage_of(const answer_plan& p) {
  return {p.prompt_tokens, p.completion_tokens, p.prompt_tokens + p.completion_tokens};
}

net::openai_answer_identity openai_identity(const answer_plan& p) {
  return {"chatcmpl-mock-" + std::to_string(p.call), p.model,
          static_cast<std::int64_t>(std::time(nullptr))};
}

net::anthropic_message_identity anthropic_identity(const answer_plan& p) {
  return {"msg_mock_" + std::to_string(p.call), p.model};
}

} // namespace

std::vector<std::string> openai_events(const answer_plan& p) {
  const auto id = openai_identity(p);
  std::vector<std::string> events;
  events.reserve(p.chunk_ends.size() + p.calls.size() * 4 + 4);
  events.push_back(net::openai_chunk_event(id, {.role = true, .content = ""}));
  for (std::size_t i = 0; i < p.chunk_ends.size(); ++i) {
    events.push_back(net::openai_chunk_event(id, {.content = text_chunk(p, i)}));
  }
  for (std::size_t c = 0; c < p.calls.size(); ++c) {
    events.push_back(
        net::openai_chunk_event(id, {.tool_calls = {{c, p.calls[c].id, p.calls[c].name, ""}}}));
  }
  for (const auto& [c, piece] : fragments(p, true)) {
    events.push_back(net::openai_chunk_event(id, {.tool_calls = {{c, "", "", piece}}}));
  }
  events.push_back(net::openai_chunk_event(id, {.finish = p.finish}));
  if (p.include_usage) {
    events.push_back(net::openai_chunk_event(id, {.usage = usage_of(p)}));
  }
  events.push_back(net::openai_done_event());
  return events;
}

std::vector<std::string> anthropic_events(const answer_plan& p) {
  std::vector<std::string> events;
  // Anthropic reports the prompt's tokens at the start and one output token so far.
  events.push_back(net::anthropic_message_start_event(anthropic_identity(p),
                                                      token_usage{p.prompt_tokens, 1, 0}));
  std::size_t index = 0;
  if (!p.chunk_ends.empty()) {
    events.push_back(net::anthropic_text_block_start_event(0));
    for (std::size_t i = 0; i < p.chunk_ends.size(); ++i) {
      events.push_back(net::anthropic_text_delta_event(0, text_chunk(p, i)));
    }
    events.push_back(net::anthropic_block_stop_event(0));
    index = 1;
  }
  const auto pieces = fragments(p, false);
  for (std::size_t c = 0; c < p.calls.size(); ++c, ++index) {
    events.push_back(
        net::anthropic_tool_use_block_start_event(index, p.calls[c].id, p.calls[c].name));
    for (const auto& [call, piece] : pieces) {
      if (call == c) {
        events.push_back(net::anthropic_input_json_delta_event(index, piece));
      }
    }
    events.push_back(net::anthropic_block_stop_event(index));
  }
  events.push_back(net::anthropic_message_delta_event(p.finish, p.completion_tokens));
  events.push_back(net::anthropic_message_stop_event());
  return events;
}

std::string whole_body(const answer_plan& p) {
  completion answer;
  answer.text = p.text;
  answer.tool_calls = p.calls;
  answer.usage = usage_of(p);
  answer.finish = p.finish;
  return p.format == net::wire_format::openai
             ? net::encode_openai_completion(openai_identity(p), answer)
             : net::encode_anthropic_message(anthropic_identity(p), answer);
}

net::http_response error_response(net::wire_format format, unsigned status, std::string_view type,
                                  std::string_view message) {
  return net::http_response::json(status, format == net::wire_format::anthropic
                                              ? net::encode_anthropic_error(type, message)
                                              : net::encode_openai_error(type, message));
}

std::string malformed_chunk() {
  // Deliberately not an encoder's output: a fault must be able to break the format.
  return "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tru\n\n";
}

} // namespace troupe::mock::detail
