#pragma once

// Reporting a test case that cannot run here as skipped, never as passed. Catch2 v2 has
// no skip, so a case in a "may skip" suite (tests/<layer>/may_skip/, registered with
// SKIP_RETURN_CODE 77, one case per process as ctest runs them) ends its process with
// that code, and ctest prints "Skipped" with the reason from the output.

#include <cstdlib>
#include <iostream>
#include <string_view>

namespace troupe::test {

/// The exit code ctest reads as "skipped" for the may-skip suites.
inline constexpr int skip_return_code = 77;

/// Ends this test process as skipped, saying why. Call it before anything that needs
/// cleaning up is created (locals are not destroyed).
[[noreturn]] inline void skip_test(std::string_view why) {
  std::cout << "SKIPPED: " << why << std::endl;
  std::exit(skip_return_code);
}

} // namespace troupe::test
