#pragma once

/// \file
/// The chat vocabulary shared by the provider adapters (net/) and the agent run core:
/// messages, tool calls, a completion request, the normalized stream of events every
/// provider is decoded into, usage, finish reasons and the kinds of provider failure.
/// Pure values, no I/O.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

/// Who wrote a chat message.
enum class chat_role { system, user, assistant, tool };

std::string_view to_string(chat_role r) noexcept;

/// One tool call requested by the model. `arguments` is the JSON text as the model wrote
/// it; it is only complete (and only worth parsing) once the call is complete.
struct tool_call {
  std::string id;
  std::string name;
  std::string arguments;

  friend bool operator==(const tool_call&, const tool_call&) = default;
};

/// One message of a conversation as sent to a model.
struct chat_message {
  chat_role role = chat_role::user;
  std::string content;
  /// Assistant messages: the tool calls the model made.
  std::vector<tool_call> tool_calls;
  /// Tool messages: the id of the call this is the result of.
  std::string tool_call_id;
  /// Tool messages: the tool's name (Anthropic does not need it; some servers do).
  std::string name;
};

/// A tool the model may call. `parameters_json` is a JSON Schema object, serialized.
struct tool_definition {
  std::string name;
  std::string description;
  std::string parameters_json = R"({"type":"object","properties":{}})";
};

/// How the model may use tools.
struct tool_choice {
  enum class mode { automatic, none, required, named };
  mode how = mode::automatic;
  /// The tool to call when `how == named`.
  std::string name;
};

/// Everything a provider needs for one completion.
struct completion_request {
  std::string model;
  std::vector<chat_message> messages;
  std::vector<tool_definition> tools;
  std::optional<tool_choice> choice;
  std::optional<double> temperature;
  std::optional<std::uint32_t> max_tokens;
  std::vector<std::string> stop;
  /// A `response_format` object in OpenAI's shape, serialized (e.g.
  /// `{"type":"json_object"}`); empty for none. Anthropic has no equivalent and ignores it.
  std::string response_format_json;
  /// Stream the answer (server-sent events) rather than wait for it whole.
  bool stream = true;
  /// The provider searches the web itself (an agent's `web_search = "builtin"`): OpenAI's
  /// wire sends `"web_search_options": {}` (OpenAI's search models search; a model
  /// without the option answers 400). Anthropic's wire refuses the request: its web search
  /// is a server tool troupe does not run.
  bool web_search = false;
};

/// Token counts. Providers report them at the end of a stream (OpenAI with
/// `include_usage`) or cumulatively while it runs (Anthropic): the latest report wins.
struct token_usage {
  std::uint64_t prompt_tokens = 0;
  std::uint64_t completion_tokens = 0;
  std::uint64_t total_tokens = 0;

  friend bool operator==(const token_usage&, const token_usage&) = default;
};

/// Why the model stopped.
enum class finish_reason {
  /// A natural end (OpenAI stop, Anthropic end_turn / stop_sequence).
  stop,
  /// The token limit cut the answer (OpenAI length, Anthropic max_tokens).
  length,
  /// The model wants tool results (OpenAI tool_calls, Anthropic tool_use).
  tool_calls,
  /// The provider's filter withheld the answer (OpenAI content_filter, Anthropic refusal).
  content_filter,
  /// Anything else a provider reports (e.g. Anthropic pause_turn).
  other,
};

std::string_view to_string(finish_reason r) noexcept;

/// One step of a model's answer, the same for every provider.
struct stream_event {
  enum class kind {
    /// `text` is more answer text.
    text_delta,
    /// `text` is more reasoning ("thinking") text, not part of the answer.
    reasoning_delta,
    /// Tool call number `index` begins: `id` and `name` are set.
    tool_call_start,
    /// `text` is more of tool call `index`'s arguments.
    tool_call_delta,
    /// Tool call `index` is complete: `id`, `name` and `text` (all its arguments).
    tool_call_complete,
    /// `usage` holds the latest token counts (replacing earlier ones).
    usage,
    /// The answer ended for `reason`.
    finish,
  };
  kind type = kind::text_delta;
  std::size_t index = 0;
  std::string text;
  std::string id;
  std::string name;
  token_usage usage;
  finish_reason reason = finish_reason::stop;
};

/// A whole answer, built from stream events.
struct completion {
  std::string text;
  std::string reasoning;
  std::vector<tool_call> tool_calls;
  std::optional<token_usage> usage;
  std::optional<finish_reason> finish;
};

/// Folds stream events into a `completion`; what it holds is always "what was received
/// so far", also when the stream broke.
class completion_builder {
public:
  void apply(const stream_event& e);
  const completion& result() const& noexcept {
    return result_;
  }
  completion result() && noexcept {
    return std::move(result_);
  }
  /// True once any answer content (text, reasoning or a tool call) has arrived.
  bool has_content() const noexcept {
    return !result_.text.empty() || !result_.reasoning.empty() || !indices_.empty();
  }

private:
  tool_call& call_at(std::size_t index);
  completion result_;
  // Provider index of each entry in result_.tool_calls.
  std::vector<std::size_t> indices_;
};

/// The kinds of provider failure, each with a fixed recovery policy.
enum class provider_failure {
  /// 429 or an equivalent error: retry after `retry_after`.
  rate_limited,
  /// 401/403: the key is wrong or lacks rights. Not retried.
  auth_failed,
  /// 404: wrong base URL or unknown model. Not retried.
  not_found,
  /// A deadline passed (connect, first byte, idle gap or total).
  timeout,
  /// 5xx or an overloaded error from the provider.
  server_error,
  /// The provider sent something that is not its wire format.
  malformed_response,
  /// The provider's filter withheld the answer.
  content_filtered,
  /// The prompt does not fit the model's context window.
  context_overflow,
  /// The answer was cut by the token limit.
  truncated,
  /// The connection failed or broke (refused, reset, stream ended early).
  connection_lost,
  /// Any other 4xx: the request itself is wrong. Not retried.
  bad_request,
  /// The caller cancelled the call.
  cancelled,
};

std::string_view to_string(provider_failure f) noexcept;

/// True for failures worth retrying before the first byte of an answer.
bool is_retryable(provider_failure f) noexcept;

/// A classified provider failure.
struct provider_error {
  provider_failure kind = provider_failure::server_error;
  std::string message;
  /// The HTTP status, when the failure came with one.
  unsigned http_status = 0;
  /// How long the provider asked us to wait (`retry-after`), when it did.
  std::optional<std::chrono::milliseconds> retry_after;
};

/// The result of one provider call: what arrived, and the failure if there was one. A
/// failure mid-stream keeps everything received before it in `answer`.
struct completion_outcome {
  completion answer;
  std::optional<provider_error> failure;
  /// Attempts made (1 when the first one succeeded or failed for good).
  unsigned attempts = 0;

  bool ok() const noexcept {
    return !failure.has_value();
  }
};

/// The failure a finish reason implies: `length` -> truncated, `content_filter` ->
/// content_filtered; none for the others.
std::optional<provider_failure> failure_for(finish_reason r) noexcept;

} // namespace troupe
