#pragma once

/// \file
/// The archive of a channel conversation (issue 17, AIClaw's archives): a Markdown summary
/// written without a model call — a title, the user's goals, the tools used with their
/// counts, and the assistant's recent decisions — from the conversation's messages. The
/// channel thread regenerates it as the conversation grows (`archive_due`) and lists the
/// archives on `/continue`. Pure functions, no I/O.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "troupe/runtime/chat.hpp"

namespace troupe::channel {

/// Limits of an archive summary (AIClaw's figures).
struct archive_limits {
  /// Goals kept: the first distinct ones the user stated.
  std::size_t max_goals = 12;
  /// Longest goal, in code points.
  std::size_t goal_runes = 160;
  /// Decisions kept: the last assistant answers.
  std::size_t max_decisions = 6;
  /// Longest decision, in code points.
  std::size_t decision_runes = 240;
  /// Longest title, in code points.
  std::size_t title_runes = 80;
};

/// What an archive says about a conversation.
struct archive_summary {
  std::string title;
  /// The user's messages in order (first line each, one line, cut; slash commands and
  /// repeats left out), at most `max_goals`.
  std::vector<std::string> goals;
  /// Each tool the assistant called and how often, most used first (ties by name).
  std::vector<std::pair<std::string, std::size_t>> tools;
  /// The last assistant answers with text, oldest first, each on one line and cut.
  std::vector<std::string> decisions;

  friend bool operator==(const archive_summary&, const archive_summary&) = default;
};

/// Summarises `messages`. The title is `title` when it is not blank, else the first
/// user message's first line, else "Untitled conversation". System and tool messages
/// add nothing but the tool calls they answer (counted from the assistant's calls).
archive_summary summarize_archive(std::span<const chat_message> messages,
                                  std::string_view title = {}, archive_limits limits = {});

/// The archive as Markdown:
///
///     # <title>
///
///     ## Goals
///     - <goal>
///
///     ## Tools used
///     - <tool> × <count>
///
///     ## Recent decisions
///     - <decision>
///
/// A section without entries says "- none".
std::string render_archive(const archive_summary& summary);

/// The archive is written once a conversation has this many messages …
inline constexpr std::size_t archive_first_at = 6;
/// … and again every this many messages after that.
inline constexpr std::size_t archive_every = 4;

/// True when a conversation of `message_count` messages, whose archive was last written
/// at `archived_at` messages (0: never), is due for a new one: at 6 messages and every
/// 4 after (6, 10, 14 …), or at once when a count was skipped past such a mark.
bool archive_due(std::size_t message_count, std::size_t archived_at) noexcept;

} // namespace troupe::channel
