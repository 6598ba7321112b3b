#pragma once

/// \file
/// The wire formats of LLM providers: building a request body from a
/// `completion_request`, decoding streamed and whole answers into the normalized
/// `stream_event` sequence, and classifying provider errors. Pure functions and small
/// stateful decoders; no I/O (the client in provider_client.hpp does the I/O).

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

#include "troupe/runtime/chat.hpp"
#include "troupe/runtime/error.hpp"

namespace troupe::net {

/// The providers troupe knows. All but `claude` speak OpenAI's Chat Completions wire.
enum class provider_type { openai, openai_compatible, openrouter, qwen, kimi, claude };

/// The two wire formats.
enum class wire_format { openai, anthropic };

/// Parses "openai", "openai-compatible", "openrouter", "qwen", "kimi" or "claude"
/// ("anthropic" is accepted for claude).
expected<provider_type> parse_provider_type(std::string_view name);
std::string_view to_string(provider_type t) noexcept;
wire_format wire_of(provider_type t) noexcept;
/// The provider's public API base URL (ending in /v1 or its equivalent); empty for
/// openai-compatible, whose base URL must be given.
std::string_view default_base_url(provider_type t) noexcept;

/// Builds an OpenAI Chat Completions request body. Streaming requests ask for usage
/// (`stream_options.include_usage`). Fails when a JSON fragment in the request (tool
/// parameters, response_format) is not valid JSON.
expected<std::string> build_openai_request(const completion_request& request);

/// Builds an Anthropic Messages request body. System messages become `system`, tool
/// results become `tool_result` blocks of a user turn, assistant tool calls become
/// `tool_use` blocks. `max_tokens` is required by Anthropic; `default_max_tokens` is
/// used when the request has none.
expected<std::string> build_anthropic_request(const completion_request& request,
                                              std::uint32_t default_max_tokens = 4096);

/// The result of decoding one piece of a provider's answer.
using decode_result = tl::expected<void, provider_error>;

/// Classifies an HTTP error answer from its status, body (an `{"error":…}` object in
/// either provider's shape, or anything) and `retry-after` header value.
provider_error classify_http_error(unsigned status, std::string_view body,
                                   std::string_view retry_after);

/// Parses a `retry-after` value: delay-seconds (fractions accepted) or an HTTP date is
/// not supported and yields nothing.
std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value);

namespace detail {
struct json_scratch;
} // namespace detail

/// Decodes an OpenAI Chat Completions stream, one SSE `data` payload at a time.
/// Tool-call fragments are joined by index; `tool_call_complete` events are emitted
/// when `finish_reason` arrives (or at `flush` when the stream ended without one).
class openai_stream_decoder {
public:
  openai_stream_decoder();
  ~openai_stream_decoder();
  openai_stream_decoder(openai_stream_decoder&&) noexcept;
  openai_stream_decoder& operator=(openai_stream_decoder&&) noexcept;

  /// Decodes one `data` payload, appending events to `out`. `[DONE]` marks the end. A
  /// payload that is not a chunk is `malformed_response`; an `{"error":…}` payload is
  /// classified like an HTTP error.
  decode_result decode(std::string_view data, std::vector<stream_event>& out);
  /// True once `[DONE]` arrived.
  bool done() const noexcept {
    return done_;
  }
  /// True once a finish reason arrived.
  bool finished() const noexcept {
    return finished_;
  }
  /// Emits `tool_call_complete` for calls still open; used when the stream ended early so
  /// that what arrived is not lost (the caller still reports the failure).
  void flush(std::vector<stream_event>& out);

private:
  struct call_state {
    std::size_t index = 0;
    std::string id;
    std::string name;
    std::string arguments;
    bool completed = false;
  };
  call_state& call_at(std::size_t index);
  void complete_calls(std::vector<stream_event>& out);

  std::unique_ptr<detail::json_scratch> json_;
  std::vector<call_state> calls_;
  bool done_ = false;
  bool finished_ = false;
};

/// Decodes a whole (non-streamed) OpenAI chat.completion body into the same events a
/// stream would have produced.
decode_result decode_openai_completion(std::string_view body, std::vector<stream_event>& out);

/// Decodes an Anthropic Messages stream, one SSE event at a time. Usage counts are
/// cumulative (assigned, not added); unknown event types are ignored.
class anthropic_stream_decoder {
public:
  anthropic_stream_decoder();
  ~anthropic_stream_decoder();
  anthropic_stream_decoder(anthropic_stream_decoder&&) noexcept;
  anthropic_stream_decoder& operator=(anthropic_stream_decoder&&) noexcept;

  /// Decodes one event (`event` may be empty: the payload's `type` is used then).
  decode_result decode(std::string_view event, std::string_view data,
                       std::vector<stream_event>& out);
  /// True once `message_stop` arrived.
  bool done() const noexcept {
    return done_;
  }
  /// True once a stop reason arrived.
  bool finished() const noexcept {
    return finished_;
  }
  /// Emits `tool_call_complete` for tool_use blocks still open.
  void flush(std::vector<stream_event>& out);

private:
  struct block_state {
    std::size_t index = 0;
    std::string id;
    std::string name;
    std::string input;
    bool tool = false;
    bool completed = false;
  };
  block_state* block_at(std::size_t index);

  std::unique_ptr<detail::json_scratch> json_;
  std::vector<block_state> blocks_;
  token_usage usage_;
  bool done_ = false;
  bool finished_ = false;
};

/// Decodes a whole (non-streamed) Anthropic message body into events.
decode_result decode_anthropic_message(std::string_view body, std::vector<stream_event>& out);

/// Maps OpenAI's finish_reason words (stop, length, tool_calls, function_call,
/// content_filter) to `finish_reason`.
finish_reason parse_openai_finish(std::string_view word) noexcept;
/// Maps Anthropic's stop_reason words (end_turn, stop_sequence, max_tokens, tool_use,
/// refusal, pause_turn) to `finish_reason`.
finish_reason parse_anthropic_stop(std::string_view word) noexcept;
/// The word OpenAI sends for `r` (the inverse of parse_openai_finish; `other` is "other").
std::string_view openai_finish_word(finish_reason r) noexcept;
/// The word Anthropic sends for `r` (the inverse of parse_anthropic_stop; `other` is
/// "pause_turn").
std::string_view anthropic_stop_word(finish_reason r) noexcept;

/// The simdjson kernel the decoders were compiled for ("westmere", "haswell", "fallback").
std::string_view json_kernel_name() noexcept;

/// Model ids from a `GET {base}/models` answer (`{"data":[{"id":…},…]}`, both wires).
tl::expected<std::vector<std::string>, provider_error> parse_model_list(std::string_view body);

} // namespace troupe::net
