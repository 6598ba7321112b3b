#include <catch2/catch.hpp>

#include "troupe/runtime/settings.hpp"

using namespace troupe;

TEST_CASE("storage settings default to WAL NORMAL, 2 ms group commit and four readers",
          "[runtime][settings][storage]") {
  const settings s;
  CHECK(s.storage.synchronous == "normal");
  CHECK(s.storage.group_commit == std::chrono::milliseconds(0));
  CHECK(s.storage.group_commit_max == 1024);
  CHECK(s.storage.read_connections == 4);
}

TEST_CASE("storage settings are read from the [storage] table, environment and flags",
          "[runtime][settings][storage]") {
  auto s = apply_toml(settings{},
                      "[storage]\nsynchronous = \"full\"\ngroup_commit_ms = 5\n"
                      "group_commit_max = 64\nread_connections = 2\n",
                      "test.toml");
  REQUIRE(s);
  CHECK(s->storage.synchronous == "full");
  CHECK(s->storage.group_commit == std::chrono::milliseconds(5));
  CHECK(s->storage.group_commit_max == 64);
  CHECK(s->storage.read_connections == 2);

  setting_sources sources;
  sources.environment["TROUPE_STORAGE_GROUP_COMMIT_MS"] = "0";
  sources.flags["storage.read_connections"] = "8";
  auto resolved = resolve_settings(sources);
  REQUIRE(resolved);
  CHECK(resolved->storage.group_commit == std::chrono::milliseconds(0));
  CHECK(resolved->storage.read_connections == 8);
  CHECK_THAT(to_toml(*resolved), Catch::Contains("[storage]"));
}

TEST_CASE("bad storage settings are rejected with the key named", "[runtime][settings][storage]") {
  auto bad_sync = apply_toml(settings{}, "[storage]\nsynchronous = \"off\"\n", "test.toml");
  REQUIRE_FALSE(bad_sync);
  CHECK_THAT(bad_sync.error().message, Catch::Contains("storage.synchronous"));
  CHECK_THAT(bad_sync.error().message, Catch::Contains("normal or full"));
  auto zero_readers = apply_toml(settings{}, "[storage]\nread_connections = 0\n", "test.toml");
  REQUIRE_FALSE(zero_readers);
  CHECK_THAT(zero_readers.error().message, Catch::Contains("storage.read_connections"));
}
