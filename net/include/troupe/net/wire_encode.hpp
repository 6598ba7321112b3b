#pragma once

/// \file
/// Writing the two provider wire formats: OpenAI chat.completion.chunk streams and whole
/// chat.completion bodies, Anthropic Messages stream events and whole message bodies,
/// and both providers' error objects. The counterpart of the decoders in
/// provider_wire.hpp, sharing their member names and finish words (net/src/wire_names.hpp),
/// so that anything written here decodes to the events it was written from. For any server
/// that speaks these formats (the scripted model of tests and the demo is one). Pure functions.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "troupe/runtime/chat.hpp"

namespace troupe::net {

// --- SSE framing ---------------------------------------------------------------------------

/// One SSE event carrying `data` (a single line: JSON has no raw newlines):
/// `data: <data>\n\n`.
std::string sse_data_event(std::string_view data);
/// One named SSE event: `event: <name>\ndata: <data>\n\n`.
std::string sse_named_event(std::string_view name, std::string_view data);

// --- OpenAI --------------------------------------------------------------------------------

/// What every chunk of one OpenAI stream (or a whole chat.completion) repeats.
struct openai_answer_identity {
  /// "chatcmpl-…".
  std::string id;
  std::string model;
  /// Unix seconds.
  std::int64_t created = 0;
};

/// One entry of a chunk's `delta.tool_calls`. A call's first fragment carries its id and
/// name, the following ones only more argument text; empty fields are left out.
struct openai_tool_call_fragment {
  std::size_t index = 0;
  std::string_view id{};
  std::string_view name{};
  std::string_view arguments{};
};

/// The content of one chat.completion.chunk. A chunk with anything for the choice (role,
/// content, reasoning, tool-call fragments or a finish reason) carries one choice at index
/// 0 whose `finish_reason` is null until the finish; a chunk with nothing but usage
/// carries `"choices":[]`, as OpenAI sends its usage chunk.
struct openai_chunk {
  /// Sends `delta.role: "assistant"` (OpenAI does on the first chunk).
  bool role = false;
  /// `delta.content`; an empty string is sent as "" (unset: not sent).
  std::optional<std::string_view> content{};
  /// `delta.reasoning_content`.
  std::optional<std::string_view> reasoning{};
  std::vector<openai_tool_call_fragment> tool_calls{};
  std::optional<finish_reason> finish{};
  std::optional<token_usage> usage{};
  /// Extra top-level members, each a key and its serialized JSON value (vendor extensions
  /// such as `"troupe":{"correction":true}`); decoders ignore them.
  std::vector<std::pair<std::string_view, std::string_view>> extensions{};
};

/// The JSON text of one chat.completion.chunk.
std::string encode_openai_chunk(const openai_answer_identity& identity, const openai_chunk& chunk);
/// The same chunk framed as an SSE event (`data: {…}\n\n`).
std::string openai_chunk_event(const openai_answer_identity& identity, const openai_chunk& chunk);
/// The SSE event that ends an OpenAI stream.
std::string openai_done_event();

/// A whole chat.completion carrying `answer`: its text (null content when it has none),
/// reasoning, tool calls (empty arguments sent as "{}"), finish reason (stop when unset)
/// and usage (left out when unset).
std::string encode_openai_completion(const openai_answer_identity& identity,
                                     const completion& answer);

/// An error object in OpenAI's shape, `{"error":{"message":…,"type":…,"code":…}}`: an
/// error body, or a payload inside a stream. `code` empty: `type` is used.
std::string encode_openai_error(std::string_view type, std::string_view message,
                                std::string_view code = {});

/// A `GET /models` answer, `{"object":"list","data":[{"id":…,"object":"model",
/// "owned_by":…},…]}`, as both wires serve it (the inverse of parse_model_list).
std::string encode_model_list(const std::vector<std::string>& ids, std::string_view owned_by);

// --- Anthropic -----------------------------------------------------------------------------

/// What an Anthropic message carries besides its content.
struct anthropic_message_identity {
  /// "msg_…".
  std::string id;
  std::string model;
};

/// The stream events of an Anthropic message, each framed as a named SSE event whose
/// name is its `type`. A stream is: message_start, then per content block a block start,
/// its deltas and a block stop, then message_delta (stop reason and output tokens) and
/// message_stop.
std::string anthropic_message_start_event(const anthropic_message_identity& identity,
                                          const token_usage& usage);
std::string anthropic_text_block_start_event(std::size_t index);
std::string anthropic_thinking_block_start_event(std::size_t index);
std::string anthropic_tool_use_block_start_event(std::size_t index, std::string_view id,
                                                 std::string_view name);
std::string anthropic_text_delta_event(std::size_t index, std::string_view text);
std::string anthropic_thinking_delta_event(std::size_t index, std::string_view text);
std::string anthropic_input_json_delta_event(std::size_t index, std::string_view partial_json);
std::string anthropic_block_stop_event(std::size_t index);
/// `usage.output_tokens` is cumulative, as Anthropic reports it.
std::string anthropic_message_delta_event(finish_reason stop, std::uint64_t output_tokens);
std::string anthropic_message_stop_event();
/// An `error` event inside a stream.
std::string anthropic_error_event(std::string_view type, std::string_view message);

/// A whole Anthropic message carrying `answer`: a thinking block (when it has reasoning),
/// a text block (when it has text), a tool_use block per call (arguments must be a JSON
/// object; empty ones are sent as {}), the stop reason (end_turn when unset) and usage.
std::string encode_anthropic_message(const anthropic_message_identity& identity,
                                     const completion& answer);

/// An error body in Anthropic's shape, `{"type":"error","error":{"type":…,"message":…}}`.
std::string encode_anthropic_error(std::string_view type, std::string_view message);

} // namespace troupe::net
