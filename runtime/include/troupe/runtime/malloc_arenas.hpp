#pragma once

// How many glibc malloc arenas the process may use.
//
// glibc gives a thread that meets contention on an arena a new arena of its own, up to
// eight per core. An arena keeps the pages of its busiest moment: freed memory stays in
// it for the threads bound to it. With a dozen threads that allocate (shards, the
// blocking pool's workers, detached actors such as the store writer, SQLite's readers
// run on the pool), a node's resident set kept rising for the first ~200,000 requests
// as each arena in turn reached its own peak (42 to 51 MiB in the residue soak, live
// heap below 10 MiB); with two arenas per shard it stays within 3% after the first
// 10,000, at the same agent throughput (docs/benchmarks.md, 6 December).

#include <optional>

namespace troupe {

/// Where the arena limit came from.
enum class arena_limit_source {
  setting,     ///< `actors.malloc_arenas`, or two per shard when that is 0
  environment, ///< MALLOC_ARENA_MAX was set: glibc's own variable wins
  unsupported, ///< not glibc: nothing applied
};

struct arena_limit {
  unsigned arenas = 0;
  arena_limit_source source = arena_limit_source::setting;
};

/// Limits the process to `configured` arenas, or to two per shard when `configured` is
/// 0 (`shards` 0: one shard per core). Call it before the threads that allocate start (an arena
/// already handed to a thread stays). When MALLOC_ARENA_MAX is in the environment it leaves glibc's
/// value.
arena_limit limit_malloc_arenas(unsigned configured, unsigned shards);

} // namespace troupe
