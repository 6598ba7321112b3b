# Every dependency comes from a Debian package (see Makefile's APT_PACKAGES).

# Boost 1.81 (not the default 1.74: it lacks Asio's awaitable operators, channels and
# as_tuple on g++ 12; see stack.md).
find_package(Boost 1.81 REQUIRED COMPONENTS json url)
add_library(troupe_boost INTERFACE)
target_link_libraries(troupe_boost INTERFACE Boost::boost Boost::json Boost::url)
target_compile_definitions(troupe_boost INTERFACE
  BOOST_ASIO_NO_DEPRECATED BOOST_BEAST_USE_STD_STRING_VIEW)

find_package(simdjson CONFIG REQUIRED)
find_package(CURL REQUIRED)
find_package(SQLite3 REQUIRED)
# libcrypto (libssl-dev) for SHA-256, HMAC, random bytes and base64 in the runtime layer.
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
find_package(tl-expected CONFIG REQUIRED)
find_package(fmt CONFIG REQUIRED)
find_package(tomlplusplus CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
# SKILL.md front matter (libyaml-cpp-dev).
find_package(yaml-cpp CONFIG REQUIRED)
find_package(Threads REQUIRED)
# The troupe executable's allocator (libmimalloc-dev; TROUPE_MIMALLOC in CMakeLists.txt).
if(TROUPE_MIMALLOC)
  find_package(mimalloc 2.0 CONFIG REQUIRED)
endif()
# web_fetch reads HTML with libxml2's HTML parser (libxml2-dev).
find_package(LibXml2 REQUIRED)

find_package(PkgConfig REQUIRED)
pkg_check_modules(SECCOMP REQUIRED IMPORTED_TARGET libseccomp)
pkg_check_modules(RE2 REQUIRED IMPORTED_TARGET re2)

# CAF 0.17.6 ships neither a CMake config nor a .pc file (stack.md).
find_path(CAF_INCLUDE_DIR caf/all.hpp REQUIRED)
find_library(CAF_CORE_LIBRARY caf_core REQUIRED)
find_library(CAF_IO_LIBRARY caf_io REQUIRED)
add_library(caf::core UNKNOWN IMPORTED)
set_target_properties(caf::core PROPERTIES
  IMPORTED_LOCATION "${CAF_CORE_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
  INTERFACE_LINK_LIBRARIES Threads::Threads)
add_library(caf::io UNKNOWN IMPORTED)
set_target_properties(caf::io PROPERTIES
  IMPORTED_LOCATION "${CAF_IO_LIBRARY}"
  INTERFACE_LINK_LIBRARIES caf::core)

if(TROUPE_BUILD_TESTS)
  find_package(Catch2 2 CONFIG REQUIRED)
endif()
if(TROUPE_BUILD_BENCH)
  find_package(benchmark CONFIG REQUIRED)
endif()
