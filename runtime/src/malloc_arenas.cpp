#include "troupe/runtime/malloc_arenas.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace troupe {

arena_limit limit_malloc_arenas(unsigned configured, unsigned shards) {
#if defined(__GLIBC__)
  if (const char* env = std::getenv("MALLOC_ARENA_MAX"); env != nullptr && *env != '\0') {
    return {static_cast<unsigned>(std::strtoul(env, nullptr, 10)), arena_limit_source::environment};
  }
  const unsigned threads = shards > 0 ? shards : std::thread::hardware_concurrency();
  const unsigned arenas = configured > 0 ? configured : 2 * std::max(1u, threads);
  if (::mallopt(M_ARENA_MAX, static_cast<int>(arenas)) == 1) {
    return {arenas, arena_limit_source::setting};
  }
  return {0, arena_limit_source::unsupported};
#else
  (void)configured;
  (void)shards;
  return {0, arena_limit_source::unsupported};
#endif
}

} // namespace troupe
