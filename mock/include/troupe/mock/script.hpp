#pragma once

/// \file
/// mock-llm's script: the rules that decide how the mock model answers a request, the
/// pacing knobs and the injectable faults, and their parsers. See mock_llm_server.hpp for
/// how a request picks its rule.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/runtime/chat.hpp"
#include "troupe/runtime/error.hpp"

namespace troupe::mock {

/// Pacing and size of an answer. Unset fields fall back to the next level
/// (header > rule > server default).
struct mock_knobs {
  std::optional<unsigned> tokens;
  std::optional<unsigned> ttft_ms;
  std::optional<unsigned> token_delay_ms;
  std::optional<unsigned> chunk_tokens;
  /// Bytes per tool-argument fragment (how finely tool calls are split).
  std::optional<unsigned> argument_fragment_bytes;
};

/// An injected failure.
struct mock_fault {
  enum class kind { none, rate_limit, server_error, auth, reset, malformed, stall, no_done, split };
  kind type = kind::none;
  /// rate_limit: the retry-after value in seconds.
  unsigned retry_after_s = 1;
  /// reset, malformed, stall: after how many chunks.
  unsigned after_chunks = 2;
  /// stall: how long.
  unsigned stall_ms = 0;
  /// split: piece size in bytes.
  unsigned split_bytes = 7;
  /// Apply only while the call number is at most this (0: always).
  unsigned until_call = 0;
};

/// Parses a fault spec such as "429:2", "reset:3", "stall:500:1", "split:5", "no-done".
expected<mock_fault> parse_mock_fault(std::string_view spec);

/// Parses a comma-separated list of fault specs, such as "429,500,reset:2,no-done".
expected<std::vector<mock_fault>> parse_mock_fault_list(std::string_view specs);

/// The fault drawn for call number `call` from `faults` at probability `rate` (0 to 1)
/// under `seed`, or a fault of kind none. Depends on nothing else, so it is thread-safe
/// and repeatable.
mock_fault draw_mock_fault(const std::vector<mock_fault>& faults, double rate, std::uint64_t seed,
                           std::uint64_t call);

/// One scripted behaviour.
struct mock_rule {
  // -- match (all given conditions must hold) --
  /// Substring the last user message must contain.
  std::optional<std::string> user_contains;
  /// Some message of the prompt (any role) contains this text.
  std::optional<std::string> prompt_contains;
  /// Whether the conversation must (or must not) contain a tool result.
  std::optional<bool> has_tool_result;
  /// The exact call number (1 = the server's first completion request).
  std::optional<std::uint64_t> call;
  /// Matches while the call number is at most this.
  std::optional<std::uint64_t> max_call;
  // -- answer --
  /// The answer text, split into words as tokens; unset: the default text.
  std::optional<std::string> text;
  /// Tool calls to make (arguments as JSON text); ids are generated when empty.
  std::vector<tool_call> tool_calls;
  /// Overrides the finish reason (e.g. length, content_filter).
  std::optional<finish_reason> finish;
  mock_knobs knobs;
  mock_fault fault;
};

/// Parses a script: a JSON array of rules, an object `{"rules":[…]}`, or JSONL (one
/// rule per line). A rule: `{"match":{"user":"…","has_tool_result":bool,"call":N,
/// "max_call":N}, "reply":{"text":"…","tool_calls":[{"name":"…","arguments":{…}}],
/// "finish_reason":"…"}, "tokens":N, "ttft_ms":N, "token_delay_ms":N, "chunk_tokens":N,
/// "fault":"spec"}`.
expected<std::vector<mock_rule>> parse_mock_script(std::string_view text);

} // namespace troupe::mock
