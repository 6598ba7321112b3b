#pragma once

/// \file
/// Context compression (issue 16): what of a long conversation's prompt is kept, pruned
/// or summarised, the summariser's request and the messages that stand for what it
/// summarised. Pure: no I/O; the run makes the model call and persists the summary.
///
/// A prompt's history is split into a head (the first `protect_head` messages), a tail
/// (the last `protect_tail`) and the middle between them. Head and tail are widened to
/// whole groups (prompt_assembly.hpp: an assistant message with tool calls and the tool
/// results answering it), so a group is never split. The pinned message (the run's
/// objective) is never summarised: when it falls in the middle it is `kept` and follows
/// the summary, so a long run's own earlier tool rounds are compressed around it.
/// Compression is due once the estimate reaches `trigger` x the context window and the
/// middle holds at least `min_middle` messages besides the pinned one. Then the middle's
/// long tool outputs are pruned first (cut to `pruned_tool_output_chars` with a marker);
/// when that is not enough, the middle is summarised, by updating the previous summary
/// when the middle holds one. The summary replaces the middle as one user message
/// starting with `summary_marker` (then the kept objective, then the tail), and a system
/// note (the `compression_note_block` slot) says once that earlier turns were compressed.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/runtime/agent_config.hpp"
#include "troupe/runtime/chat.hpp"

namespace troupe::prompt {

/// When and how much is compressed (`[compression]`; agent_config.hpp).
using troupe::compression_settings;

/// The first line of a summary message.
inline constexpr std::string_view summary_marker = "[Context Compression Summary]";
/// The context block slot of the system note (see `compression_note`).
inline constexpr std::string_view compression_note_block = "compression_note";
/// What a pruned tool output keeps of its text (characters).
inline constexpr std::size_t pruned_tool_output_chars = 200;
/// What the summariser sees of each message (characters).
inline constexpr std::size_t summary_input_message_chars = 1000;

/// What `plan_compression` looks at. Views: the input must outlive the call only.
struct compression_input {
  /// The prompt's history, oldest first, without the system message.
  std::span<const chat_message> history;
  /// The estimate of what the request carries besides the history: the system message
  /// and the tool definitions.
  std::size_t fixed_tokens = 0;
  /// The model's context window.
  std::size_t context_window = default_context_window;
  compression_settings settings;
  /// Index of a message that is never summarised (kept after the summary when it falls
  /// in the middle); unset: none.
  std::optional<std::size_t> pinned;
  /// Compress whatever the estimate (`/compact`): only the message counts must allow it.
  bool force = false;
};

/// What to do with a history (see the file comment).
struct compression_plan {
  /// The estimate of each message of the history, parallel to it.
  std::vector<std::size_t> message_tokens;
  /// The estimate of the whole prompt (fixed tokens and history) as it is.
  std::size_t estimated_tokens = 0;
  /// `trigger` x context window.
  std::size_t trigger_tokens = 0;
  /// Head: [0, head_end); middle: [head_end, tail_begin); tail: [tail_begin, size).
  std::size_t head_end = 0;
  std::size_t tail_begin = 0;
  /// The pinned message when it is in the middle: not summarised, it follows the summary.
  std::optional<std::size_t> kept;
  /// Tool messages of the middle whose output is cut, and the estimate once they are.
  std::vector<std::size_t> prune;
  std::size_t pruned_tokens = 0;
  /// The middle is summarised (pruning alone leaves the estimate at the trigger or over).
  bool summarise = false;
  /// The newest summary message in the middle, which the new summary updates.
  std::optional<std::size_t> previous_summary;
  /// Empty when something is to be done; otherwise why nothing is.
  std::string skipped;

  /// True when the plan prunes or summarises anything.
  bool acts() const noexcept {
    return skipped.empty() && (summarise || !prune.empty());
  }
  std::size_t middle_size() const noexcept {
    return tail_begin > head_end ? tail_begin - head_end : 0;
  }
  /// The messages the summary stands for: the middle but the kept one.
  std::size_t covered() const noexcept {
    return middle_size() - (kept ? 1 : 0);
  }
};

/// Plans the compression of a history. O(messages + characters): each message is
/// estimated once, and a pruned tool output is estimated without copying its message; no
/// allocation beyond the plan's own.
compression_plan plan_compression(const compression_input& input);

/// Cuts a tool output to `pruned_tool_output_chars` characters (whole UTF-8 code points)
/// followed by a marker saying how much was cut; shorter text is returned as it is.
std::string prune_tool_output(std::string_view text);

/// Applies the plan's pruning to `history` in place.
void apply_pruning(std::vector<chat_message>& history, const compression_plan& plan);

/// True for a message that is a compression summary (its content starts with the marker).
bool is_summary(const chat_message& message) noexcept;

/// The summary's text without the marker line.
std::string_view summary_text(const chat_message& message) noexcept;

/// The message that stands for a summarised middle.
chat_message summary_message(std::string_view summary);

/// The system note said once in a compressed prompt.
std::string_view compression_note() noexcept;

/// The sections a summary has, in order.
std::span<const std::string_view> summary_sections() noexcept;

/// The summariser's request for the plan's middle of `history` on `model`: a system
/// prompt naming the sections, and one user message with the middle (each message cut to
/// `summary_input_message_chars`, tool outputs pruned, the oldest left out when they do
/// not fit `context_window`). When the middle holds a previous summary, the request asks
/// to update that summary with the newer messages instead of summarising it again.
/// Temperature 0.3; max_tokens clamp(0.2 x the middle's tokens, 2000, 4000), at most a
/// quarter of the window. Not streamed.
completion_request summary_request(std::span<const chat_message> history,
                                   const compression_plan& plan, std::string model,
                                   std::size_t context_window);

/// The history once the middle is replaced by `summary`: head, summary message, the kept
/// pinned message (when it was in the middle), tail.
std::vector<chat_message> compressed_history(std::span<const chat_message> history,
                                             const compression_plan& plan,
                                             std::string_view summary);

/// Where message `i` of the history is once compressed by `plan` (`compressed_history`'s
/// order); nullopt for a message the summary stands for.
std::optional<std::size_t> compressed_index(const compression_plan& plan, std::size_t i);

/// How a conversation's stored turns are shaped when it is brought back into memory.
struct load_shape {
  /// Newest turns loaded in full.
  std::size_t full_turns = 3;
  /// Turns before those loaded with every message cut to `truncated_chars`.
  std::size_t truncated_turns = 5;
  std::size_t truncated_chars = 500;
};

/// One stored turn: a user message and what followed it, oldest first. `row` is the
/// caller's tag for the turn (its run), returned with each shaped message.
struct stored_turn {
  std::vector<chat_message> messages;
  std::int64_t row = 0;
  /// The caller's tag of each message (its stored row), parallel to `messages`; may be
  /// empty (then every message's tag is 0).
  std::vector<std::int64_t> tags;
};

/// A conversation's history as loaded: the messages and, parallel to them, the tag of the
/// turn each came from and the tag of the message itself.
struct loaded_history {
  std::vector<chat_message> messages;
  std::vector<std::int64_t> rows;
  std::vector<std::int64_t> tags;
};

/// Shapes stored turns for a prompt: the newest `full_turns` in full, the
/// `truncated_turns` before them cut message by message, older ones as their user
/// message and final answer only; then the oldest turns are left out while the estimate
/// exceeds `budget_tokens` (0: no budget), the newest turn always kept. A tool group
/// whose results are not all stored is left out whole.
loaded_history shape_loaded_history(std::span<const stored_turn> turns, std::size_t budget_tokens,
                                    const load_shape& shape = {});

} // namespace troupe::prompt
