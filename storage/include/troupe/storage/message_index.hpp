#pragma once

/// \file
/// The messages' full-text index, kept up to date off the answer path. A message is
/// stored without touching the index; the store writer indexes what is pending a moment
/// later, many messages in one pass (index_pending_messages). FTS5 writes a new segment at
/// every commit that carries index changes, so indexing each message in the commit that
/// stores it cost about 125,000 instructions per commit (callgrind, a one-round chat:
/// two such commits); one pass every few tens of milliseconds shares that among every
/// message of the interval. The `fts` search engine reads the index only: whoever must
/// find the newest messages runs a pass first (the session_search tool asks the store
/// writer for one, store_writer.hpp); a plain search misses at most the messages of the
/// last pass interval.
///
/// `fts_progress.indexed_to` (schema version 11) is the highest message id in the index.
/// Messages take ids above it, never below (next_message_id), so a message is pending
/// exactly when its id is above `indexed_to`; the update and delete triggers change the
/// index only for indexed messages.

#include <cstdint>

#include "troupe/storage/connection.hpp"
#include "troupe/storage/records.hpp"

namespace troupe::storage {

/// The highest message id in the full-text index; 0 when there is no index.
expected<row_id> messages_indexed_to(connection& c);

/// The id the next message takes: above every message and above `indexed_to` (an id at
/// or below it would never be indexed). For one writer connection only.
expected<row_id> next_message_id(connection& c);

/// Puts up to `max_rows` pending messages (the oldest first) into the index, in one
/// transaction, and advances `indexed_to`. Returns how many it indexed (0 without an
/// index, or when none is pending).
expected<std::int64_t> index_pending_messages(connection& c, std::int64_t max_rows);

} // namespace troupe::storage
