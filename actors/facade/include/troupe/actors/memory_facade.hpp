#pragma once

/// \file
/// The memory facade: how the HTTP layer changes a user's durable memory without seeing
/// an actor. Every change goes to that user's memory writer (one actor per user, so
/// concurrent changes of one user are applied one after another, never lost) and is
/// answered once it is durable. Reads do not go through here: use the read pool and
/// `storage/memory.hpp`.

#include <boost/asio/awaitable.hpp>

#include "troupe/runtime/error.hpp"
#include "troupe/storage/memory.hpp"
#include "troupe/storage/search.hpp"

namespace troupe::actors {

class memory_facade {
public:
  virtual ~memory_facade() = default;

  /// Queues `change` on the memory writer of `user` (the owner of the item it changes)
  /// and resumes when it is durable, failed or timed out.
  virtual boost::asio::awaitable<expected<storage::memory_write_result>>
  write(storage::row_id user, storage::memory_change change) = 0;

  /// Resumes once every change queued before this call for `user` that came from
  /// conversation `conversation` (0: from anywhere) is done. What a conversation awaits
  /// before it compacts its context, so no memory write races the compaction.
  virtual boost::asio::awaitable<expected<void>> settle(storage::row_id user,
                                                        storage::row_id conversation) = 0;

  /// Session search: the messages of `q.owner_user_id` matching `q.text`, best first,
  /// after every message committed so far was indexed (so the turn just taken is found).
  virtual boost::asio::awaitable<expected<std::vector<storage::search_hit>>>
  search_messages(storage::search_query q) = 0;
};

} // namespace troupe::actors
