#include "troupe/storage/catalog_cache.hpp"

#include <catch2/catch.hpp>

#include "storage_fixture.hpp"

using namespace troupe;
using namespace troupe::storage;
using namespace troupe::storage::testing;

namespace {

row_id add_token(fresh_db& f, row_id user, const std::string& hash) {
  api_token_record t;
  t.user_id = user;
  t.name = "laptop";
  t.token_hash = hash;
  return must(insert_api_token(f.db, t));
}

std::shared_ptr<read_pool> pool_of(fresh_db& f) {
  return must(read_pool::open(f.dir.db(), 1));
}

} // namespace

TEST_CASE("the catalog cache serves a token from memory until it is invalidated",
          "[storage][catalog_cache]") {
  fresh_db f;
  const auto user = f.add_user("ann");
  const auto id = add_token(f, user, "sha256:abc");
  catalog_cache cache(pool_of(f));
  CHECK(must(cache.token_by_hash("sha256:abc")).user_id == user);
  CHECK(must(cache.token_by_hash("sha256:abc")).id == id);
  CHECK(cache.counters().hits == 1);
  CHECK(cache.counters().misses == 1);
  // Revoked behind the cache's back: still served from memory...
  must(revoke_api_token(f.db, id));
  CHECK(cache.token_by_hash("sha256:abc").has_value());
  // ...until the write is announced; then the revocation holds.
  cache.invalidate();
  CHECK(cache.token_by_hash("sha256:abc").error().code == errc::not_found);
}

TEST_CASE("the catalog cache does not remember a miss: a token made later is found",
          "[storage][catalog_cache]") {
  fresh_db f;
  const auto user = f.add_user("ann");
  catalog_cache cache(pool_of(f));
  CHECK(cache.token_by_hash("sha256:new").error().code == errc::not_found);
  add_token(f, user, "sha256:new");
  CHECK(must(cache.token_by_hash("sha256:new")).user_id == user);
}

TEST_CASE("the catalog cache finds agents by id, by name and by uuid, and their providers",
          "[storage][catalog_cache]") {
  fresh_db f;
  provider_record p;
  p.name = "mock";
  p.kind = "openai";
  const auto provider = must(insert_provider(f.db, p));
  agent_record a;
  a.uuid = "agent-uuid";
  a.name = "helper";
  a.main_model = "m";
  a.provider_id = provider;
  const auto agent = must(insert_agent(f.db, a));
  catalog_cache cache(pool_of(f));
  CHECK(must(cache.agent(agent)).name == "helper");
  CHECK(must(cache.agent_by_name_or_uuid("helper")).id == agent);
  CHECK(must(cache.agent_by_name_or_uuid("agent-uuid")).id == agent);
  CHECK(cache.agent_by_name_or_uuid("nobody").error().code == errc::not_found);
  CHECK(must(cache.provider(provider)).name == "mock");
  // An edited agent is seen after the invalidation that follows the edit.
  auto edited = must(find_agent(f.db, agent));
  edited.main_model = "m2";
  must(update_agent(f.db, edited));
  CHECK(must(cache.agent(agent)).main_model == "m");
  cache.invalidate();
  CHECK(must(cache.agent(agent)).main_model == "m2");
  CHECK(cache.counters().invalidations == 1);
}

TEST_CASE("the catalog cache keeps at most its capacity and stays correct past it",
          "[storage][catalog_cache]") {
  fresh_db f;
  const auto user = f.add_user("ann");
  for (int i = 0; i < 5; ++i) {
    add_token(f, user, "sha256:" + std::to_string(i));
  }
  catalog_cache cache(pool_of(f), 2);
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 5; ++i) {
      CHECK(must(cache.token_by_hash("sha256:" + std::to_string(i))).user_id == user);
    }
  }
  // Every lookup missed but the ones that followed a refill of the same entry.
  CHECK(cache.counters().misses >= 8);
}
