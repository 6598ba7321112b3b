# cmake -DDIR=<dir> -P check_no_mock.cmake (or include() it with DIR set): fails when a C++
# file under DIR is named after the mock model server or mentions it, in code or comment.
# troupe_net holds no test double: the mock model server is troupe_mock, in mock/, on top
# of net (mock/README.md).
include("${CMAKE_CURRENT_LIST_DIR}/lines_matching.cmake")
troupe_lines_matching(troupe_mock_check_bad "${DIR}" "[Mm][Oo][Cc][Kk]")
file(GLOB_RECURSE troupe_mock_check_files "${DIR}/*.hpp" "${DIR}/*.cpp" "${DIR}/*.h")
foreach(f IN LISTS troupe_mock_check_files)
  get_filename_component(name "${f}" NAME)
  string(TOLOWER "${name}" name)
  if(name MATCHES "mock")
    string(APPEND troupe_mock_check_bad "  ${f}: its name\n")
  endif()
endforeach()
if(troupe_mock_check_bad)
  message(FATAL_ERROR "files under ${DIR} hold or mention the mock model server, which "
                      "belongs in mock/:\n${troupe_mock_check_bad}")
endif()
message(STATUS "no mock model server under ${DIR}")
