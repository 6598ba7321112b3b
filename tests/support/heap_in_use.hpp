#pragma once

// The bytes the C allocator has handed out and not had back, over all its arenas
// (glibc's mallinfo2): what tests of "nothing stays behind" compare before and after.

#include <malloc.h>

#include <cstddef>

namespace troupe::test {

inline std::size_t heap_in_use() {
  return mallinfo2().uordblks;
}

} // namespace troupe::test
