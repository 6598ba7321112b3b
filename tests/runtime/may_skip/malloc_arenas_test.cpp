// The glibc arena limit `troupe serve` sets (runtime/malloc_arenas.hpp). A may-skip case:
// under a sanitizer, malloc is the sanitizer's and mallopt(M_ARENA_MAX) is refused, so the
// setting cannot be checked there and the case says it skipped.

#include <cstdlib>

#include <catch2/catch.hpp>

#include "support/skip.hpp"
#include "troupe/runtime/malloc_arenas.hpp"

using namespace troupe;

#if defined(__GLIBC__)

TEST_CASE("the arena limit is the setting, or two per shard when the setting is 0",
          "[runtime][malloc]") {
  ::unsetenv("MALLOC_ARENA_MAX");
  auto configured = limit_malloc_arenas(5, 3);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  if (configured.source == arena_limit_source::unsupported) {
    test::skip_test("the sanitizer's malloc refuses mallopt(M_ARENA_MAX)");
  }
#endif
  CHECK(configured.source == arena_limit_source::setting);
  CHECK(configured.arenas == 5);
  auto per_shard = limit_malloc_arenas(0, 3);
  CHECK(per_shard.source == arena_limit_source::setting);
  CHECK(per_shard.arenas == 6);
  auto per_core = limit_malloc_arenas(0, 0);
  CHECK(per_core.arenas >= 2);
  CHECK(per_core.arenas % 2 == 0);
}

TEST_CASE("MALLOC_ARENA_MAX in the environment wins over the setting", "[runtime][malloc]") {
  ::setenv("MALLOC_ARENA_MAX", "3", 1);
  auto limit = limit_malloc_arenas(8, 4);
  ::unsetenv("MALLOC_ARENA_MAX");
  CHECK(limit.source == arena_limit_source::environment);
  CHECK(limit.arenas == 3);
}

#endif
