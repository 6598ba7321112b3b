// Custom tools and search engines in their tables (issue 18).

#include <catch2/catch.hpp>

#include "storage/storage_fixture.hpp"
#include "troupe/storage/custom_tools.hpp"

using namespace troupe;
using namespace troupe::storage;
using namespace troupe::storage::testing;

namespace {

custom_tool_settings http_tool(std::string name) {
  custom_tool_settings t;
  t.name = std::move(name);
  t.description = "d";
  t.url = "https://example.org/{q}";
  t.parameters = R"({"type":"object","properties":{"q":{"type":"string"}}})";
  t.headers = {{"Authorization", "Bearer ${TROUPE_KEY_X}"}};
  t.agents = {"helper"};
  return t;
}

search_engine_settings engine(std::string name, bool is_default = false) {
  search_engine_settings e;
  e.name = std::move(name);
  e.type = search_engine_type::brave;
  e.key_env = "TROUPE_KEY_BRAVE";
  e.is_default = is_default;
  return e;
}

} // namespace

TEST_CASE("a custom tool is stored whole and read back, and a name is taken once",
          "[storage][custom_tools]") {
  fresh_db f;
  auto t = http_tool("weather");
  must(insert_custom_tool(f.db, t));
  CHECK(must(find_custom_tool(f.db, "weather")) == t);
  auto again = insert_custom_tool(f.db, t);
  REQUIRE_FALSE(again);
  CHECK(again.error().code == errc::conflict);

  t.url = "https://example.org/v2/{q}";
  t.enabled = false;
  must(upsert_custom_tool(f.db, t));
  const auto listed = must(list_custom_tools(f.db));
  REQUIRE(listed.size() == 1);
  CHECK(listed[0] == t);
  // The columns hold what the table's readers see without the JSON.
  CHECK(must(f.db.query_int("SELECT enabled FROM tools WHERE name = 'weather'")) == 0);

  custom_tool_settings s;
  s.name = "count";
  s.kind = custom_tool_kind::script;
  s.language = script_language::bash;
  s.code = "wc -c";
  must(insert_custom_tool(f.db, s));
  CHECK(must(find_custom_tool(f.db, "count")) == s);
  CHECK(must(list_custom_tools(f.db)).size() == 2);

  CHECK(must(delete_custom_tool(f.db, "weather")));
  CHECK_FALSE(must(delete_custom_tool(f.db, "weather")));
  CHECK(find_custom_tool(f.db, "weather").error().code == errc::not_found);
}

TEST_CASE("a custom tool's approval is kept in a column of its own, cleared with null, and the "
          "table refuses a value that is no approval mode",
          "[storage][custom_tools][approval]") {
  fresh_db f;
  auto t = http_tool("notify");
  t.approval = approval_mode::always;
  must(insert_custom_tool(f.db, t));
  CHECK(must(find_custom_tool(f.db, "notify")) == t);
  CHECK(must(f.db.query_int(
            "SELECT COUNT(*) FROM tools WHERE name = 'notify' AND approval = 'always'")) == 1);
  // Not in the tool's JSON as well: the column is the one place that holds it.
  CHECK(must(f.db.query_int("SELECT COUNT(*) FROM tools WHERE name = 'notify' AND "
                            "json_extract(config_json, '$.approval') IS NOT NULL")) == 0);

  t.approval = approval_mode::agent_initiated;
  must(upsert_custom_tool(f.db, t));
  CHECK(must(find_custom_tool(f.db, "notify")).approval == approval_mode::agent_initiated);
  t.approval.reset();
  must(upsert_custom_tool(f.db, t));
  CHECK_FALSE(must(find_custom_tool(f.db, "notify")).approval.has_value());
  CHECK(must(f.db.query_int("SELECT COUNT(*) FROM tools WHERE approval IS NULL")) == 1);

  CHECK_FALSE(f.db.exec("UPDATE tools SET approval = 'sometimes' WHERE name = 'notify'"));
}

TEST_CASE("declared tools and engines are marked, replaced at each start, and removed when "
          "the config drops them",
          "[storage][custom_tools]") {
  fresh_db f;
  must(insert_custom_tool(f.db, http_tool("from_api")));
  CHECK(must(sync_declared_custom_tools(f.db, {http_tool("a"), http_tool("b")})) == 2);
  CHECK(must(find_custom_tool(f.db, "a")).declared);
  CHECK_FALSE(must(find_custom_tool(f.db, "from_api")).declared);
  CHECK(must(sync_declared_custom_tools(f.db, {http_tool("b")})) == 1);
  CHECK(find_custom_tool(f.db, "a").error().code == errc::not_found);
  CHECK(must(list_custom_tools(f.db)).size() == 2);

  must(insert_search_engine_settings(f.db, engine("mine")));
  CHECK(must(sync_declared_search_engines(f.db, {engine("conf", true)})) == 1);
  auto engines = must(list_search_engine_settings(f.db));
  REQUIRE(engines.size() == 2);
  CHECK(engines[0].name == "conf");
  CHECK(engines[0].declared);
  CHECK(engines[0].is_default);
  CHECK_FALSE(engines[1].declared);
  CHECK(must(sync_declared_search_engines(f.db, {})) == 0);
  CHECK(must(list_search_engine_settings(f.db)).size() == 1);
}

TEST_CASE("a search engine keeps its key variable's name, and one default at a time",
          "[storage][custom_tools]") {
  fresh_db f;
  must(insert_search_engine_settings(f.db, engine("one", true)));
  auto two = engine("two", true);
  two.type = search_engine_type::searxng;
  two.base_url = "http://127.0.0.1:8888";
  two.key_env.clear();
  must(insert_search_engine_settings(f.db, two));
  CHECK_FALSE(must(find_search_engine(f.db, "one")).is_default);
  CHECK(must(find_search_engine(f.db, "two")) == two);
  CHECK(must(find_search_engine(f.db, "one")).key_env == "TROUPE_KEY_BRAVE");
  CHECK(insert_search_engine_settings(f.db, engine("one")).error().code == errc::conflict);
  CHECK(must(delete_search_engine(f.db, "two")));
  CHECK(find_search_engine(f.db, "two").error().code == errc::not_found);
}
