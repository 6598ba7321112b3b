#pragma once

/// \file
/// The guard that keeps `troupe bench` on this machine: a target URL is accepted only if
/// its host is a loopback address literal (127.0.0.0/8, ::1) or `localhost`. The check
/// parses the URL text and never resolves a name, so nothing leaves the process for a
/// refused target: not a DNS query, not a connection.

#include <cstdint>
#include <string>
#include <string_view>

#include "troupe/runtime/error.hpp"

namespace troupe::bench {

/// A checked http:// URL split into its parts.
struct loopback_url {
  std::string host;
  std::uint16_t port = 80;
  /// Path and query, "/" when the URL has none.
  std::string target;
  /// scheme://host:port (no path), for joining with another route.
  std::string origin;
};

/// Accepts `url` when it is http:// to a loopback host; else `invalid_argument` (bad
/// URL, another scheme) or `permission_denied` (a host outside loopback, or a name
/// other than localhost, which would need resolving).
expected<loopback_url> check_loopback_url(std::string_view url);

} // namespace troupe::bench
