#pragma once

/// \file
/// Build identity reported by `troupe version` and `GET /version`.

#include <string_view>

namespace troupe {

/// The release version, e.g. "0.1.0".
std::string_view version() noexcept;

/// The compiler and build type troupe was built with, e.g. "g++ 12.2.0, RelWithDebInfo".
std::string_view build_info() noexcept;

} // namespace troupe
