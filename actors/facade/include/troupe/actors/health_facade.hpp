#pragma once

/// \file
/// The health facade: proves to `GET /healthz` that the actor scheduler runs and answers,
/// not just that a socket accepts.

#include <chrono>
#include <cstdint>

#include <boost/asio/awaitable.hpp>

#include "troupe/runtime/error.hpp"

namespace troupe::actors {

class health_facade {
public:
  virtual ~health_facade() = default;

  /// Pings the health actor; the pings it served so far, or an error when it did not
  /// answer within `deadline`.
  virtual boost::asio::awaitable<expected<std::uint64_t>>
  ping(std::chrono::milliseconds deadline) = 0;
};

} // namespace troupe::actors
