# -DHYDROZOA_FUZZ=ON: a build for the libFuzzer targets in fuzz/ (see
# fuzz/README.md). Included by the top-level CMakeLists.txt before any target,
# so that every library the parsers live in is instrumented too.
option(HYDROZOA_FUZZ "Build the libFuzzer targets in fuzz/ (clang; instruments every target)" OFF)
if(HYDROZOA_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "HYDROZOA_FUZZ needs clang (libFuzzer): configure a separate build directory with "
                        "-DCMAKE_CXX_COMPILER=clang++, or run fuzz/run")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=address,undefined)
endif()
