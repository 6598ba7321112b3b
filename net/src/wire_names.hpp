#pragma once

/// \file
/// The JSON member names and fixed values of the two provider wire formats, in one place
/// for the decoders (provider_wire.cpp) and the encoders (wire_encode.cpp), so that what
/// troupe writes and what it reads cannot drift apart. Private to troupe_net.

#include <string_view>

namespace troupe::net::wire_names {

/// OpenAI Chat Completions (chat.completion and chat.completion.chunk).
namespace openai {
constexpr std::string_view id = "id";
constexpr std::string_view object = "object";
constexpr std::string_view created = "created";
constexpr std::string_view model = "model";
constexpr std::string_view choices = "choices";
constexpr std::string_view index = "index";
constexpr std::string_view delta = "delta";
constexpr std::string_view message = "message";
constexpr std::string_view role = "role";
constexpr std::string_view content = "content";
constexpr std::string_view reasoning_content = "reasoning_content";
/// Some servers (OpenRouter) name the reasoning text `reasoning`.
constexpr std::string_view reasoning = "reasoning";
constexpr std::string_view tool_calls = "tool_calls";
constexpr std::string_view type = "type";
constexpr std::string_view function = "function";
constexpr std::string_view name = "name";
constexpr std::string_view arguments = "arguments";
constexpr std::string_view logprobs = "logprobs";
constexpr std::string_view finish_reason = "finish_reason";
constexpr std::string_view usage = "usage";
constexpr std::string_view prompt_tokens = "prompt_tokens";
constexpr std::string_view completion_tokens = "completion_tokens";
constexpr std::string_view total_tokens = "total_tokens";
constexpr std::string_view error = "error";
constexpr std::string_view code = "code";

// The model list (GET /models, both wires).
constexpr std::string_view data = "data";
constexpr std::string_view owned_by = "owned_by";
constexpr std::string_view list_object = "list";
constexpr std::string_view model_object = "model";

constexpr std::string_view chunk_object = "chat.completion.chunk";
constexpr std::string_view completion_object = "chat.completion";
constexpr std::string_view assistant_role = "assistant";
constexpr std::string_view function_type = "function";
/// The `data` payload that ends a stream.
constexpr std::string_view done_payload = "[DONE]";
} // namespace openai

/// Anthropic Messages (message bodies and stream events).
namespace anthropic {
constexpr std::string_view type = "type";
constexpr std::string_view id = "id";
constexpr std::string_view role = "role";
constexpr std::string_view model = "model";
constexpr std::string_view message = "message";
constexpr std::string_view content = "content";
constexpr std::string_view content_block = "content_block";
constexpr std::string_view index = "index";
constexpr std::string_view delta = "delta";
constexpr std::string_view text = "text";
constexpr std::string_view thinking = "thinking";
constexpr std::string_view partial_json = "partial_json";
constexpr std::string_view name = "name";
constexpr std::string_view input = "input";
constexpr std::string_view stop_reason = "stop_reason";
constexpr std::string_view stop_sequence = "stop_sequence";
constexpr std::string_view usage = "usage";
constexpr std::string_view input_tokens = "input_tokens";
constexpr std::string_view output_tokens = "output_tokens";
constexpr std::string_view error = "error";

// Event types (also the SSE `event:` names).
constexpr std::string_view message_start = "message_start";
constexpr std::string_view content_block_start = "content_block_start";
constexpr std::string_view content_block_delta = "content_block_delta";
constexpr std::string_view content_block_stop = "content_block_stop";
constexpr std::string_view message_delta = "message_delta";
constexpr std::string_view message_stop = "message_stop";
constexpr std::string_view error_event = "error";

// Block and delta types.
constexpr std::string_view text_block = "text";
constexpr std::string_view thinking_block = "thinking";
constexpr std::string_view tool_use_block = "tool_use";
constexpr std::string_view server_tool_use_block = "server_tool_use";
constexpr std::string_view text_delta = "text_delta";
constexpr std::string_view thinking_delta = "thinking_delta";
constexpr std::string_view input_json_delta = "input_json_delta";

constexpr std::string_view message_type = "message";
constexpr std::string_view assistant_role = "assistant";
} // namespace anthropic

} // namespace troupe::net::wire_names
