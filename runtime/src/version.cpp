#include "troupe/runtime/version.hpp"

#include "troupe/runtime/version_info.hpp"

namespace troupe {

std::string_view version() noexcept {
  return TROUPE_VERSION_STRING;
}

std::string_view build_info() noexcept {
#if defined(__clang__)
  return "clang " __clang_version__;
#elif defined(__GNUC__)
  return "g++ " __VERSION__;
#else
  return "unknown compiler";
#endif
}

} // namespace troupe
