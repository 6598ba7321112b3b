#pragma once

/// \file
/// Session search: find a user's own messages by words. Two engines share one contract:
/// FTS5 (bm25 ranking) and a LIKE scan used when FTS5 is unavailable. User text is never
/// passed through as query syntax: it is split into words, each quoted.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/storage/connection.hpp"
#include "troupe/storage/records.hpp"

namespace troupe::storage {

/// Which engine answers a search.
enum class search_engine_kind {
  /// FTS5 when the index exists, LIKE otherwise.
  automatic,
  fts,
  like,
};

/// A search request. Only conversations owned by `owner_user_id` are searched.
struct search_query {
  row_id owner_user_id = 0;
  std::string text;
  /// At most this many hits (clamped to 1..100).
  std::int64_t limit = 20;
  search_engine_kind engine = search_engine_kind::automatic;
  /// FTS only: a word found in more messages than this (all users counted) is a stop
  /// word — it neither selects nor ranks hits, unless every word is one, and then hits
  /// come newest first. bm25 reads every posting of every query word to weigh it, so a
  /// word in most of a million messages would cost tens of milliseconds. 0: no limit.
  std::int64_t common_term_rows = 20000;
};

/// One hit. The contract both engines keep: hits come from the owner's conversations
/// only, contain at least one query word, best first, at most `limit`; `snippet` is at
/// most about 200 characters of the message around a match, matches marked `[` `]`.
/// "Best": bm25 for FTS (newest first when every word is a stop word, see
/// `common_term_rows`), number of distinct words matched then newest for LIKE.
struct search_hit {
  row_id message_id = 0;
  row_id conversation_id = 0;
  std::string conversation_uuid;
  std::string role;
  std::string snippet;
  std::int64_t created_at = 0;
};

/// The words of `text` (letters, digits and any non-ASCII character; everything else
/// separates), at most 16, each at most 64 bytes.
std::vector<std::string> query_terms(std::string_view text);

/// The FTS5 MATCH expression for `text`: its words, each double-quoted, joined by OR.
/// Empty when `text` has no words.
std::string fts_match_expression(std::string_view text);

/// Runs a search. Text with no words yields no hits (not an error); `fts` without the
/// index fails with `unavailable`, and finds only the messages already indexed
/// (message_index.hpp: index_pending_messages first to find every one).
expected<std::vector<search_hit>> search_messages(connection& c, const search_query& q);

} // namespace troupe::storage
