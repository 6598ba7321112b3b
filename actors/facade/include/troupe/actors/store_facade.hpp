#pragma once

/// \file
/// The store facade: how the HTTP layer writes the database without seeing an actor.
/// Every write goes to the store_writer (the only writer) and is answered once it is
/// durable; the deadline is `store_write_timeout` (store_writer.hpp). Reads do not go
/// through here: use the read pool.

#include <cstdint>

#include <boost/asio/awaitable.hpp>

#include "troupe/runtime/error.hpp"
#include "troupe/storage/write_op.hpp"

namespace troupe::actors {

class store_facade {
public:
  virtual ~store_facade() = default;

  /// Sends `op` to the store_writer and resumes when it is durable (the row id it
  /// produced, 0 for none), failed or timed out.
  virtual boost::asio::awaitable<expected<std::int64_t>> write(storage::write_op op) = 0;
};

} // namespace troupe::actors
