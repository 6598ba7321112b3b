#pragma once

/// \file
/// Group commit: many writes in one transaction, each in its own savepoint, so a failing
/// write is undone alone and the others still commit.

#include <cstdint>
#include <span>
#include <vector>

#include "troupe/storage/write_op.hpp"

namespace troupe::storage {

/// Applies `ops` in order in one transaction and commits it. The result for each op is
/// its own outcome; if the transaction itself cannot begin or commit, every op fails with
/// that error (nothing of the batch is stored). Never throws: an exception from an op
/// becomes that op's `internal` error.
std::vector<expected<std::int64_t>> apply_batch(connection& c, std::span<const write_op> ops);

} // namespace troupe::storage
