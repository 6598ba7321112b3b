# cmake -DDIR=<dir> -P check_no_caf.cmake: fails when a C++ file under DIR includes a CAF
# header (api/ sees actors/ only through its CAF-free facades).
file(GLOB_RECURSE files "${DIR}/*.hpp" "${DIR}/*.cpp" "${DIR}/*.h")
set(bad "")
foreach(f IN LISTS files)
  file(STRINGS "${f}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]caf/")
  foreach(line IN LISTS lines)
    string(APPEND bad "  ${f}: ${line}\n")
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "files under ${DIR} include CAF headers:\n${bad}")
endif()
message(STATUS "no CAF include under ${DIR}")
