# cmake -DSCRIPT=<embed_console.cmake> -DWORK=<scratch dir> -P check_embed_refuses_links.cmake
#
# The console's embedder (embed_console.cmake) must embed only regular files inside
# web/console: a symbolic link to a file outside it (/etc/passwd), a link to a folder, or a
# file with a name it does not accept stops it with a message naming the file, and writes
# no source. A clean folder embeds (the control).

cmake_minimum_required(VERSION 3.25)

file(REMOVE_RECURSE "${WORK}")
set(problems "")

# Makes <dir>/web with an index and one asset; returns the web dir.
function(make_web dir)
  file(MAKE_DIRECTORY "${dir}/web/console/views")
  file(WRITE "${dir}/web/index.html" "<script type=\"module\" src=\"{{asset_base}}/app.js\"></script>\n")
  file(WRITE "${dir}/web/console/app.js" "export const x = 1;\n")
endfunction()

# Runs the embedder on <dir>/web; sets rc, err and whether the source was written.
function(embed dir)
  execute_process(COMMAND "${CMAKE_COMMAND}" -DWEB_DIR=${dir}/web -DOUT=${dir}/out.cpp -P "${SCRIPT}"
                  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  set(rc "${rc}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
  if(EXISTS "${dir}/out.cpp")
    set(written TRUE PARENT_SCOPE)
  else()
    set(written FALSE PARENT_SCOPE)
  endif()
endfunction()

# The control: a clean folder embeds, the index's base filled in.
make_web("${WORK}/clean")
embed("${WORK}/clean")
if(NOT rc EQUAL 0 OR NOT written)
  string(APPEND problems "  a clean web/ did not embed (${rc}): ${err}\n")
else()
  file(READ "${WORK}/clean/out.cpp" source)
  if(NOT source MATCHES "\"app\\.js\", \"text/javascript; charset=utf-8\"")
    string(APPEND problems "  the clean web/ did not embed app.js with its media type\n")
  endif()
endif()

# Refused: each case with the words its message must say.
set(cases "file-link" "dir-link" "bad-name" "unknown-type")
foreach(case IN LISTS cases)
  set(dir "${WORK}/${case}")
  make_web("${dir}")
  if(case STREQUAL "file-link")
    file(CREATE_LINK "/etc/passwd" "${dir}/web/console/passwd.js" SYMBOLIC)
    set(expect "passwd.js is a symbolic link")
  elseif(case STREQUAL "dir-link")
    file(CREATE_LINK "/etc" "${dir}/web/console/etc" SYMBOLIC)
    set(expect "etc is a symbolic link")
  elseif(case STREQUAL "bad-name")
    file(WRITE "${dir}/web/console/views/.hidden.js" "x\n")
    set(expect "asset names are")
  else()
    file(WRITE "${dir}/web/console/notes.txt" "x\n")
    set(expect "unknown file type")
  endif()
  embed("${dir}")
  if(rc EQUAL 0)
    string(APPEND problems "  ${case}: the embedder accepted it\n")
  elseif(NOT err MATCHES "${expect}")
    string(APPEND problems "  ${case}: the message does not say '${expect}': ${err}\n")
  endif()
  if(written)
    string(APPEND problems "  ${case}: a source was written all the same\n")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK}")
if(problems)
  message(FATAL_ERROR "the console embedder:\n${problems}")
endif()
message(STATUS "the console embedder refuses links, bad names and unknown types")
