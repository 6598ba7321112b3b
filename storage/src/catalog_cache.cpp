#include "troupe/storage/catalog_cache.hpp"

#include "troupe/storage/database.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::storage {

catalog_cache::catalog_cache(std::shared_ptr<read_pool> reads, std::size_t capacity)
    : reads_(std::move(reads)), capacity_(capacity == 0 ? 1 : capacity) {}

template <class Map, class Key, class Load>
auto catalog_cache::lookup(Map& map, const Key& key, Load load) -> decltype(load()) {
  std::uint64_t generation = 0;
  {
    std::lock_guard lock(mutex_);
    if (auto it = map.find(key); it != map.end()) {
      ++stats_.hits;
      return it->second;
    }
    ++stats_.misses;
    generation = generation_;
  }
  auto loaded = load();
  if (loaded) {
    std::lock_guard lock(mutex_);
    // Kept only when no write invalidated the cache since the read began.
    if (generation == generation_) {
      if (map.size() >= capacity_) {
        map.clear();
      }
      map.insert_or_assign(key, *loaded);
    }
  }
  return loaded;
}

expected<api_token_record> catalog_cache::token_by_hash(const std::string& token_hash) {
  return lookup(tokens_, token_hash, [&] {
    return reads_->with([&](connection& c) { return find_api_token(c, token_hash); });
  });
}

expected<agent_record> catalog_cache::agent(row_id id) {
  return lookup(agents_, id,
                [&] { return reads_->with([&](connection& c) { return find_agent(c, id); }); });
}

expected<agent_record> catalog_cache::agent_by_name_or_uuid(const std::string& name) {
  return lookup(agents_by_name_, name, [&] {
    return reads_->with([&](connection& c) {
      auto found = find_agent_by_name(c, name);
      if (!found && found.error().code == errc::not_found) {
        found = find_agent_by_uuid(c, name);
      }
      return found;
    });
  });
}

expected<provider_record> catalog_cache::provider(row_id id) {
  return lookup(providers_, id,
                [&] { return reads_->with([&](connection& c) { return find_provider(c, id); }); });
}

void catalog_cache::invalidate() {
  std::lock_guard lock(mutex_);
  ++generation_;
  ++stats_.invalidations;
  tokens_.clear();
  agents_.clear();
  agents_by_name_.clear();
  providers_.clear();
}

catalog_cache::stats catalog_cache::counters() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

} // namespace troupe::storage
