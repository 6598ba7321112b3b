#include <catch2/catch.hpp>

#include "troupe/runtime/settings.hpp"

using namespace troupe;

TEST_CASE("[api] settings are read from the file and printed back", "[runtime][settings]") {
  auto s = apply_toml({},
                      "[api]\nrate_per_second = 2.5\nrate_burst = 10\nmax_upload_bytes = 4096\n"
                      "cors_origins = \"https://a.example, https://b.example\"\n"
                      "open_metrics = true\n",
                      "test.toml");
  REQUIRE(s);
  CHECK(s->api.rate_per_second == 2.5);
  CHECK(s->api.rate_burst == 10.0);
  CHECK(s->api.max_upload_bytes == 4096);
  CHECK(s->api.cors_origins == std::vector<std::string>{"https://a.example", "https://b.example"});
  CHECK(s->api.open_metrics);
  auto again = apply_toml({}, to_toml(*s), "printed");
  REQUIRE(again);
  CHECK(again->api.rate_per_second == 2.5);
  CHECK(again->api.cors_origins == s->api.cors_origins);
}

TEST_CASE("[api] settings refuse rates that are not positive numbers", "[runtime][settings]") {
  settings s;
  CHECK_FALSE(apply_setting(s, "api.rate_per_second", "0"));
  CHECK_FALSE(apply_setting(s, "api.rate_per_second", "fast"));
  CHECK_FALSE(apply_setting(s, "api.rate_burst", "0.5"));
  CHECK_FALSE(apply_setting(s, "api.open_metrics", "yes"));
  CHECK(apply_setting(s, "api.cors_origins", ""));
  CHECK(s.api.cors_origins.empty());
}
