# cmake -DDIR=<tests dir> -P check_no_sleep.cmake: fails when a C++ file under DIR sleeps
# (sleep_for, sleep_until, usleep, nanosleep or sleep(...), or a shell's `sleep N` in a
# script it runs) unless the file is in DIR/sleeps_allowed.txt, where a sleep is the
# subject of a test, and that line of it, or a // comment line right above it, says why.
# Tests wait on events or poll a condition through support/wait_until.hpp, never sleep to
# synchronise (docs/testing.md).

cmake_policy(SET CMP0057 NEW) # if(... IN_LIST ...)
set(call_regex "[^_A-Za-z0-9](sleep|usleep|nanosleep|sleep_for|sleep_until)[ \t]*\\(|[^_A-Za-z0-9]sleep[ \t]+[0-9]")

# The allow-list: "path: reason" lines, the path relative to DIR.
file(STRINGS "${DIR}/sleeps_allowed.txt" entries REGEX "^[^#].*:")
set(allowed "")
set(problems "")
foreach(entry IN LISTS entries)
  string(REGEX REPLACE "^([^:]+):[ \t]*(.*)$" "\\1" path "${entry}")
  string(REGEX REPLACE "^([^:]+):[ \t]*(.*)$" "\\2" reason "${entry}")
  if(reason STREQUAL "" OR reason STREQUAL entry)
    string(APPEND problems "  sleeps_allowed.txt: ${path} gives no reason\n")
  endif()
  if(NOT EXISTS "${DIR}/${path}")
    string(APPEND problems "  sleeps_allowed.txt: ${path} does not exist\n")
  endif()
  list(APPEND allowed "${path}")
endforeach()

file(GLOB_RECURSE files RELATIVE "${DIR}" "${DIR}/*.cpp" "${DIR}/*.hpp" "${DIR}/*.h")
set(sleeping "")
foreach(f IN LISTS files)
  if(f MATCHES "node_modules/")
    continue()
  endif()
  file(READ "${DIR}/${f}" text)
  # One list element per line: first take out what a CMake list would read as structure.
  string(REPLACE "\\" "<bs>" text "${text}")
  string(REPLACE ";" "<sc>" text "${text}")
  string(REPLACE "[" "<lb>" text "${text}")
  string(REPLACE "]" "<rb>" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(number 0)
  set(previous "")
  foreach(line IN LISTS lines)
    math(EXPR number "${number} + 1")
    set(above "${previous}")
    set(previous "${line}")
    if(NOT " ${line}" MATCHES "${call_regex}")
      continue()
    endif()
    list(APPEND sleeping "${f}")
    string(REPLACE "<sc>" ";" shown "${line}")
    string(REPLACE "<lb>" "[" shown "${shown}")
    string(REPLACE "<rb>" "]" shown "${shown}")
    string(REPLACE "<bs>" "\\" shown "${shown}")
    string(STRIP "${shown}" shown)
    if(NOT f IN_LIST allowed)
      string(APPEND problems "  ${f}:${number}: ${shown}\n")
    elseif(NOT " ${line}" MATCHES "(${call_regex}).*//" AND NOT above MATCHES "^[ \t]*//")
      string(APPEND problems "  ${f}:${number}: allowed file, but no // comment says why: ${shown}\n")
    endif()
  endforeach()
endforeach()

# An entry whose file no longer sleeps is stale: the list names only what it must.
foreach(path IN LISTS allowed)
  if(EXISTS "${DIR}/${path}" AND NOT path IN_LIST sleeping)
    string(APPEND problems "  sleeps_allowed.txt: ${path} no longer sleeps; remove the entry\n")
  endif()
endforeach()

if(problems)
  message(FATAL_ERROR "tests must not sleep to synchronise: wait on the event, or poll the "
                      "condition with support/wait_until.hpp (or, where the sleep is the "
                      "subject, list the file in tests/sleeps_allowed.txt):\n${problems}")
endif()
list(LENGTH allowed n)
message(STATUS "no sleep under ${DIR} outside the ${n} allowed files")
