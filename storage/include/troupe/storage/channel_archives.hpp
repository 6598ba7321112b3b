#pragma once

/// \file
/// Archives of channel conversations (issue 17): one Markdown summary per conversation,
/// written without a model from its messages and tool calls (runtime/channel/archive.hpp),
/// owned by the conversation's channel user `channel:<name>:<sender>`, so that a sender
/// lists and resumes only their own. Regenerated as the conversation grows and when it is
/// left with `/new`; deleted with the conversation. Same conventions as repositories.hpp.

#include <cstdint>
#include <string>
#include <vector>

#include "troupe/storage/connection.hpp"
#include "troupe/storage/records.hpp"

namespace troupe::storage {

struct channel_archive_record {
  row_id id = 0;
  row_id owner_user_id = 0;
  row_id conversation_id = 0;
  /// The conversation's uuid (read back with the archive).
  std::string conversation_uuid;
  std::string title;
  /// The Markdown summary (render_archive).
  std::string summary;
  /// How many messages the conversation had when the summary was written.
  std::int64_t message_count = 0;
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
};

/// Writes (or rewrites) the archive of conversation `conversation_id` from its stored
/// messages: the summary, its title, the message count, owned by the conversation's
/// owner. Returns the archive as written.
expected<channel_archive_record> write_channel_archive(connection& c, row_id conversation_id);

/// The archive of a conversation (not_found when none was written).
expected<channel_archive_record> find_channel_archive(connection& c, row_id conversation_id);

/// A user's archives, newest first, leaving out conversation `except` (the thread's
/// current one; 0: none), at most `limit`.
expected<std::vector<channel_archive_record>>
list_channel_archives(connection& c, row_id owner_user_id, row_id except, std::int64_t limit);

} // namespace troupe::storage
