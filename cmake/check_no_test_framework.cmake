# cmake -DDIR=<dir> -P check_no_test_framework.cmake: fails when the library under DIR (a
# test double the product's binary links, like fakes/) depends on a test framework or on a
# test suite: a C++ file including Catch2, GoogleTest or Google Benchmark, or a
# "support/…" header that is not DIR's own (tests/support is the suites', not the
# binary's), or DIR/CMakeLists.txt naming one of those frameworks.
include("${CMAKE_CURRENT_LIST_DIR}/lines_matching.cmake")
troupe_lines_matching(troupe_tf_bad "${DIR}"
                      "^[ \t]*#[ \t]*include[ \t]*[<\"](catch2/|catch\\.hpp|gtest/|gmock/|benchmark/)")
troupe_lines_matching(troupe_tf_support "${DIR}" "^[ \t]*#[ \t]*include[ \t]*\"support/")
string(REPLACE "\n" ";" troupe_tf_support "${troupe_tf_support}")
foreach(row IN LISTS troupe_tf_support)
  if(row MATCHES "\"(support/[^\"]+)\"")
    # Two steps: CMAKE_MATCH_1 is set by the match, after the first if()'s arguments are read.
    if(NOT EXISTS "${DIR}/include/${CMAKE_MATCH_1}")
      string(APPEND troupe_tf_bad "${row}: not a header of ${DIR}/include\n")
    endif()
  endif()
endforeach()
if(EXISTS "${DIR}/CMakeLists.txt")
  file(STRINGS "${DIR}/CMakeLists.txt" troupe_tf_links REGEX "Catch2|GTest|benchmark::")
  foreach(line IN LISTS troupe_tf_links)
    if(NOT line MATCHES "^[ \t]*#")
      string(APPEND troupe_tf_bad "  ${DIR}/CMakeLists.txt: ${line}\n")
    endif()
  endforeach()
endif()
if(troupe_tf_bad)
  message(FATAL_ERROR "${DIR} depends on a test framework or a test suite:\n${troupe_tf_bad}")
endif()
message(STATUS "no test framework or test suite under ${DIR}")
