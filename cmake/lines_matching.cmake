# troupe_lines_matching(OUT DIR REGEX): every line of a C++ file under DIR (.hpp, .cpp,
# .h) that matches REGEX, as "  <file>: <line>\n" rows in OUT, for the layer checks
# (check_no_caf.cmake, check_no_mock.cmake).
function(troupe_lines_matching out dir regex)
  file(GLOB_RECURSE files "${dir}/*.hpp" "${dir}/*.cpp" "${dir}/*.h")
  set(rows "")
  foreach(f IN LISTS files)
    file(STRINGS "${f}" lines REGEX "${regex}")
    foreach(line IN LISTS lines)
      string(APPEND rows "  ${f}: ${line}\n")
    endforeach()
  endforeach()
  set(${out} "${rows}" PARENT_SCOPE)
endfunction()
