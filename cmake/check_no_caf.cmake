# cmake -DDIR=<dir> -P check_no_caf.cmake: fails when a C++ file under DIR includes a CAF
# header (api/ sees actors/ only through its CAF-free facades).
include("${CMAKE_CURRENT_LIST_DIR}/lines_matching.cmake")
troupe_lines_matching(bad "${DIR}" "^[ \t]*#[ \t]*include[ \t]*[<\"]caf/")
if(bad)
  message(FATAL_ERROR "files under ${DIR} include CAF headers:\n${bad}")
endif()
message(STATUS "no CAF include under ${DIR}")
