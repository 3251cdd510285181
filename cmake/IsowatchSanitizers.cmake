# SPDX-License-Identifier: Apache-2.0
if(ISOWATCH_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    add_compile_options(-fsanitize-ignorelist=${CMAKE_CURRENT_LIST_DIR}/ubsan-ignorelist.txt)
  endif()
endif()
if(ISOWATCH_BUILD_FUZZ)
  # Coverage instrumentation for the project's code too, not just the fuzz harnesses, so that
  # libFuzzer is guided by the branches of the parsers and decoders it exercises.
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
