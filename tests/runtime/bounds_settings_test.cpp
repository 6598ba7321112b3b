#include <catch2/catch.hpp>

#include "troupe/runtime/settings.hpp"

using namespace troupe;

TEST_CASE("the bounds default to 64 pending messages, 32,000 history tokens, 4096 waiting "
          "writes and 30 unauthenticated requests per address",
          "[runtime][settings]") {
  const settings s;
  CHECK(s.actors.max_pending == 64);
  CHECK(s.actors.history_max_tokens == 32'000);
  CHECK(s.storage.writer_max_queue == 4096);
  CHECK(s.api.unauthenticated_rate_burst == 30.0);
  CHECK(s.api.unauthenticated_rate_per_second == 1.0);
  CHECK(s.api.unauthenticated_max_addresses == 10'000);
}

TEST_CASE("the bounds are read from the file and printed back", "[runtime][settings]") {
  auto s = apply_toml({},
                      "[actors]\nmax_pending = 3\nhistory_max_tokens = 500\n"
                      "[storage]\nwriter_max_queue = 7\n"
                      "[api]\nunauthenticated_rate_per_second = 0.5\n"
                      "unauthenticated_rate_burst = 4\nunauthenticated_max_addresses = 9\n",
                      "test.toml");
  REQUIRE(s);
  CHECK(s->actors.max_pending == 3);
  CHECK(s->actors.history_max_tokens == 500);
  CHECK(s->storage.writer_max_queue == 7);
  CHECK(s->api.unauthenticated_rate_per_second == 0.5);
  CHECK(s->api.unauthenticated_rate_burst == 4.0);
  CHECK(s->api.unauthenticated_max_addresses == 9);
  auto again = apply_toml({}, to_toml(*s), "printed");
  REQUIRE(again);
  CHECK(again->actors.max_pending == 3);
  CHECK(again->actors.history_max_tokens == 500);
  CHECK(again->storage.writer_max_queue == 7);
  CHECK(again->api.unauthenticated_rate_per_second == 0.5);
  CHECK(again->api.unauthenticated_max_addresses == 9);
}

TEST_CASE("the bounds refuse values out of range", "[runtime][settings]") {
  settings s;
  CHECK_FALSE(apply_setting(s, "actors.max_pending", "-1"));
  CHECK_FALSE(apply_setting(s, "actors.history_max_tokens", "many"));
  CHECK_FALSE(apply_setting(s, "api.unauthenticated_rate_per_second", "0"));
  CHECK_FALSE(apply_setting(s, "api.unauthenticated_rate_burst", "0.5"));
  CHECK_FALSE(apply_setting(s, "api.unauthenticated_max_addresses", "0"));
  CHECK(apply_setting(s, "storage.writer_max_queue", "0"));
  CHECK(s.storage.writer_max_queue == 0);
}
