#pragma once

/// \file
/// The rows every request reads — API tokens, agents, providers — served from memory.
/// A miss reads through the read pool and keeps what it found; `invalidate` (called
/// after any write that may change those rows: the API's writes do it) drops everything,
/// so a revoked token or an edited agent is never served from before the change. A read
/// that raced with an invalidation is returned to its caller but not kept (a generation
/// number decides), so no stale row can settle in the cache.
///
/// Thread-safe. Reads on a miss block on SQLite like any `read_pool` read.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "troupe/runtime/error.hpp"
#include "troupe/storage/records.hpp"

namespace troupe::storage {

class read_pool;

class catalog_cache {
public:
  /// Entries kept per kind before the kind is emptied and refilled.
  static constexpr std::size_t default_capacity = 10'000;

  explicit catalog_cache(std::shared_ptr<read_pool> reads, std::size_t capacity = default_capacity);

  /// The live (not revoked) token with this hash; `not_found` otherwise.
  expected<api_token_record> token_by_hash(const std::string& token_hash);
  expected<agent_record> agent(row_id id);
  /// An agent by name, or else by uuid (as the chat routes accept either).
  expected<agent_record> agent_by_name_or_uuid(const std::string& name);
  expected<provider_record> provider(row_id id);

  /// Forgets every row; reads from now on see the database as committed.
  void invalidate();

  struct stats {
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;
    std::uint64_t invalidations = 0;
  };
  stats counters() const;

private:
  template <class Map, class Key, class Load>
  auto lookup(Map& map, const Key& key, Load load) -> decltype(load());

  std::shared_ptr<read_pool> reads_;
  std::size_t capacity_;
  mutable std::mutex mutex_;
  std::uint64_t generation_ = 0;
  stats stats_;
  std::unordered_map<std::string, api_token_record> tokens_;
  std::unordered_map<row_id, agent_record> agents_;
  std::unordered_map<std::string, agent_record> agents_by_name_;
  std::unordered_map<row_id, provider_record> providers_;
};

} // namespace troupe::storage
