#pragma once

/// \file
/// Slash commands of a channel (issue 17): recognising `/new`, `/continue 2`,
/// `/help@troupe_bot` … in an inbound message, and the answers that need no state (the
/// help text, the archive listing, the out-of-range message). The channel thread answers
/// a command without the model; any other text, an unknown `/x` included, goes to the
/// model. Pure functions, no I/O.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace troupe::channel {

/// What a message asks for.
enum class command_kind {
  /// Not a command: the text goes to the model (an unknown `/x` too).
  none,
  /// `/new` or `/reset`: archive the current conversation and start a fresh one.
  new_conversation,
  /// `/continue` alone: list the archived conversations.
  continue_list,
  /// `/continue N`: resume archive N of the listing (`index`, 1-based; 0 when the
  /// argument is not a positive number, which the caller answers as out of range).
  continue_pick,
  /// `/archives`: list the archived conversations (as `/continue` alone).
  archives,
  /// `/stop`: cancel the active run.
  stop,
  /// `/status`: what the thread is doing.
  status,
  /// `/help`: the command list.
  help,
  /// `/compact`: compact the conversation's context now.
  compact,
  /// `/approve ID` and `/deny ID` (issue 19): decide the pending approval `argument`
  /// of a run of this thread.
  approve,
  deny,
};

/// The snake_case name of a kind ("new_conversation", …), for logs and tests.
std::string_view to_string(command_kind k) noexcept;

/// A parsed message.
struct command {
  command_kind kind = command_kind::none;
  /// The command word as typed, lower-cased, without the slash and `@bot` ("reset").
  /// Empty for text that does not start with a slash.
  std::string name;
  /// The `@botname` suffix as typed, without the `@` (Telegram groups); empty if none.
  std::string addressee;
  /// What follows the command word, trimmed ("2" for `/continue 2`).
  std::string argument;
  /// `continue_pick`: the 1-based archive number, 0 when the argument is not one.
  std::size_t index = 0;

  friend bool operator==(const command&, const command&) = default;
};

/// Reads `text` as a command: a leading `/word` (after white space), optionally
/// `/word@botname`, then an argument. Command words are matched ASCII case-insensitively.
/// When `bot_name` is given and the message is addressed to another bot (`/new@other`),
/// the result is `none`: in a Telegram group that command is not ours to answer.
command parse_command(std::string_view text, std::string_view bot_name = {});

/// At most this many archives are listed by `/continue` and `/archives`.
inline constexpr std::size_t max_listed_archives = 10;

/// One archived conversation as the listing shows it.
struct archive_entry {
  std::string title;
  /// When the archive was last written; shown in UTC.
  std::chrono::system_clock::time_point updated_at{};
};

/// The listing `N. title — MM-DD HH:MM`, one line each (newest first is the caller's
/// order), at most `max_listed_archives` lines, then a line on how to resume one. Titles
/// are shown on one line, cut at 60 code points; an empty title shows as "Untitled".
/// With no entries: a sentence saying there are none yet.
std::string format_archive_list(std::span<const archive_entry> entries);

/// The answer to `/continue N` when N does not name a listed archive: `argument` as the
/// user typed it, `listed` how many archives the listing offers (capped by the caller
/// at `max_listed_archives`).
std::string continue_out_of_range(std::string_view argument, std::size_t listed);

/// The answer to `/help`: every command with one line on what it does.
std::string_view help_text() noexcept;

/// The answer to `/new` and `/reset` once the fresh conversation exists.
std::string_view new_conversation_text() noexcept;

/// The answer to `/continue N` once archive `title` is resumed.
std::string resumed_text(std::string_view title);

/// The message that asks the thread's user to decide a pending approval (issue 19): the
/// tool, its arguments (cut at 300 code points), why it waits, and the two answers
/// (`/approve ID`, `/deny ID`) with the time left.
std::string approval_request_text(std::string_view id, std::string_view tool,
                                  std::string_view arguments, std::string_view reason,
                                  std::int64_t timeout_s);

/// What a decision over the channel answers.
enum class approval_answer {
  /// Stored and handed to the run.
  approved,
  denied,
  /// No approval with that id waits for this sender (another user's is not shown to
  /// exist), or the id is missing.
  unknown,
  /// Decided already (by someone, or by its deadline): `status` says how.
  decided,
};
/// The answer to `/approve ID` or `/deny ID`: `tool` and `status` when known.
std::string approval_answer_text(approval_answer answer, std::string_view id,
                                 std::string_view tool = {}, std::string_view status = {});

} // namespace troupe::channel
