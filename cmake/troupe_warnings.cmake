# Warning and sanitizer flags shared by every troupe target (style.md).
add_library(troupe_build_flags INTERFACE)
target_compile_options(troupe_build_flags INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wnon-virtual-dtor
  # g++ 12 reports Asio's awaitable frame allocator (operator new with a thread-local
  # recycler, sized delete) as mismatched in some coroutines: a known false positive.
  -Wno-mismatched-new-delete)
if(TROUPE_WERROR)
  target_compile_options(troupe_build_flags INTERFACE -Werror)
endif()
if(TROUPE_SANITIZE)
  # -fno-sanitize=null: CAF 0.17's init_fun_factory binds a null reference on every spawn
  # (stack.md); it is harmless and would otherwise drown every real report.
  target_compile_options(troupe_build_flags INTERFACE
    -fsanitize=address,undefined -fno-sanitize=null -fno-omit-frame-pointer
    -fno-sanitize-recover=undefined)
  target_link_options(troupe_build_flags INTERFACE -fsanitize=address,undefined)
endif()
if(TROUPE_SANITIZE_THREAD)
  # ThreadSanitizer (preset tsan, `make tsan`). It cannot be combined with ASan.
  if(TROUPE_SANITIZE)
    message(FATAL_ERROR "TROUPE_SANITIZE and TROUPE_SANITIZE_THREAD exclude each other")
  endif()
  # -Wno-tsan: g++ 12 warns that TSan does not model std::atomic_thread_fence, which
  # Asio's handler completion (std_fenced_block) calls. Asio's hand-offs between threads
  # synchronise through its scheduler's mutex and atomics, which TSan does see; the fence
  # is extra ordering on top.
  target_compile_options(troupe_build_flags INTERFACE -fsanitize=thread -fno-omit-frame-pointer
                                                      -Wno-tsan)
  target_link_options(troupe_build_flags INTERFACE -fsanitize=thread)
endif()

# troupe_layer(NAME DEPS...) defines static library troupe_NAME (alias troupe::NAME) from
# NAME/src/*.cpp with public headers under NAME/include.
function(troupe_layer name)
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/src/*.cpp")
  add_library(troupe_${name} STATIC ${sources})
  add_library(troupe::${name} ALIAS troupe_${name})
  target_include_directories(troupe_${name}
    PUBLIC "${CMAKE_CURRENT_SOURCE_DIR}/include"
    PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}/src")
  target_link_libraries(troupe_${name} PRIVATE troupe_build_flags)
endfunction()
