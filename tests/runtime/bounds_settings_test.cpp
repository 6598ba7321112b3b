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

TEST_CASE("the compression settings default to the issue's values, are read from "
          "[compression] and refuse values out of range",
          "[runtime][settings][compression]") {
  const settings defaults;
  CHECK(defaults.compression.trigger == 0.5);
  CHECK(defaults.compression.protect_head == 1);
  CHECK(defaults.compression.protect_tail == 20);
  CHECK(defaults.compression.min_middle == 5);

  auto s = apply_toml({},
                      "[compression]\ntrigger = 0.75\nprotect_head = 2\nprotect_tail = 8\n"
                      "min_middle = 3\n",
                      "test.toml");
  REQUIRE(s);
  CHECK(s->compression.trigger == 0.75);
  CHECK(s->compression.protect_head == 2);
  CHECK(s->compression.protect_tail == 8);
  CHECK(s->compression.min_middle == 3);
  auto again = apply_toml({}, to_toml(*s), "printed");
  REQUIRE(again);
  CHECK(again->compression.trigger == 0.75);
  CHECK(again->compression.protect_tail == 8);

  settings t;
  CHECK_FALSE(apply_setting(t, "compression.trigger", "0"));
  CHECK_FALSE(apply_setting(t, "compression.trigger", "1.5"));
  CHECK_FALSE(apply_setting(t, "compression.trigger", "half"));
  CHECK_FALSE(apply_setting(t, "compression.min_middle", "0"));
  CHECK_FALSE(apply_setting(t, "compression.protect_tail", "-1"));
  CHECK(apply_setting(t, "compression.trigger", "1"));
  CHECK(t.compression.trigger == 1.0);
  CHECK(apply_setting(t, "compression.protect_head", "0"));
  CHECK(t.compression.protect_head == 0);
  // An unknown key of the table is an error, as everywhere.
  CHECK_FALSE(apply_toml({}, "[compression]\ntriger = 0.5\n", "typo.toml"));
}
