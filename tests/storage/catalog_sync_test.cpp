#include "storage/storage_fixture.hpp"
#include "troupe/storage/catalog_sync.hpp"

using namespace troupe;
using namespace troupe::storage;
using namespace troupe::storage::testing;

namespace {

std::vector<provider_settings> declared_providers() {
  provider_settings p;
  p.name = "local";
  p.type = "openai-compatible";
  p.base_url = "http://127.0.0.1:9000/v1";
  p.api_key_env = "LOCAL_API_KEY";
  p.api_key = "sk-inline-secret";
  p.models = {"m1", "m1-mini"};
  return {p};
}

std::vector<agent_settings> declared_agents() {
  agent_settings a;
  a.name = "assistant";
  a.provider = "local";
  a.model = "m1";
  a.fast_model = "m1-mini";
  a.system_prompt = "Be brief.";
  a.tools = {"read", "finish"};
  a.max_rounds = 9;
  a.queue = queue_policy::collect;
  return {a};
}

std::string scalar(connection& c, const std::string& sql) {
  auto stmt = must(c.prepare(sql));
  REQUIRE(must(stmt.step()));
  return stmt.text(0);
}

} // namespace

TEST_CASE("declared providers and agents are created in the database", "[storage][catalog]") {
  fresh_db f;
  auto result = must(sync_declared_catalog(f.db, declared_providers(), declared_agents()));
  CHECK(result.providers_created == 1);
  CHECK(result.agents_created == 1);
  CHECK(scalar(f.db, "SELECT kind || ' ' || base_url || ' ' || api_key_ref FROM providers") ==
        "openai-compatible http://127.0.0.1:9000/v1 LOCAL_API_KEY");
  CHECK(scalar(f.db, "SELECT main_model || ' ' || fast_model || ' ' || queue_policy || ' ' || "
                     "tools_json || ' ' || limits_json FROM agents WHERE name = 'assistant'") ==
        R"(m1 m1-mini collect ["read","finish"] {"max_rounds":9,"timeout_s":600})");
  // The agent points at the declared provider.
  CHECK(scalar(f.db, "SELECT p.name FROM agents a JOIN providers p ON p.id = a.provider_id") ==
        "local");
}

TEST_CASE("syncing again updates by name and keeps the agent's identity", "[storage][catalog]") {
  fresh_db f;
  must(sync_declared_catalog(f.db, declared_providers(), declared_agents()));
  const auto uuid = scalar(f.db, "SELECT uuid FROM agents WHERE name = 'assistant'");
  auto agents = declared_agents();
  agents[0].model = "m1-mini";
  auto result = must(sync_declared_catalog(f.db, declared_providers(), agents));
  CHECK(result.agents_created == 0);
  CHECK(result.agents_updated == 1);
  CHECK(result.providers_updated == 1);
  CHECK(scalar(f.db, "SELECT count(*) FROM agents") == "1");
  CHECK(scalar(f.db, "SELECT main_model FROM agents") == "m1-mini");
  CHECK(scalar(f.db, "SELECT uuid FROM agents") == uuid);
}

TEST_CASE("an inline api key is never written to the database", "[storage][catalog]") {
  fresh_db f;
  must(sync_declared_catalog(f.db, declared_providers(), declared_agents()));
  auto stmt = must(f.db.prepare("SELECT count(*) FROM providers WHERE name || kind || base_url || "
                                "api_key_ref || config_json LIKE '%sk-inline-secret%'"));
  REQUIRE(must(stmt.step()));
  CHECK(stmt.int64(0) == 0);
}

TEST_CASE("an agent naming an undeclared provider fails the whole sync", "[storage][catalog]") {
  fresh_db f;
  auto agents = declared_agents();
  agents[0].provider = "elsewhere";
  auto result = sync_declared_catalog(f.db, declared_providers(), agents);
  REQUIRE_FALSE(result);
  CHECK_THAT(result.error().message, Catch::Contains("agent 'assistant'"));
  CHECK(scalar(f.db, "SELECT count(*) FROM providers") == "0"); // rolled back
}

TEST_CASE("declared context windows are kept in the provider's config and the agent's limits",
          "[storage][catalog]") {
  fresh_db f;
  auto providers = declared_providers();
  providers[0].context_window = 32'000;
  auto agents = declared_agents();
  agents[0].context_window = 8'192;
  must(sync_declared_catalog(f.db, providers, agents));
  CHECK(scalar(f.db, "SELECT json_extract(config_json, '$.context_window') FROM providers") ==
        "32000");
  CHECK(scalar(f.db, "SELECT json_extract(limits_json, '$.context_window') FROM agents") == "8192");
  // An agent without its own window inherits the provider's: its limits do not name one.
  agents[0].context_window = 0;
  must(sync_declared_catalog(f.db, providers, agents));
  CHECK(scalar(f.db, "SELECT json_type(limits_json, '$.context_window') IS NULL FROM agents") ==
        "1");
}
