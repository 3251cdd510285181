# SPDX-License-Identifier: Apache-2.0
# check_headers: compiles every public header of src/ on its own (not part of `all`).
file(GLOB_RECURSE _isowatch_headers RELATIVE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/src/isowatch/*.h)
set(_check_sources "")
foreach(h ${_isowatch_headers})
  string(REPLACE "/" "_" _name ${h})
  set(_src ${CMAKE_BINARY_DIR}/check_headers/${_name}.cc)
  file(WRITE ${_src} "#include \"${h}\"\n")
  list(APPEND _check_sources ${_src})
endforeach()
add_library(check_headers OBJECT EXCLUDE_FROM_ALL ${_check_sources})
target_link_libraries(check_headers PRIVATE isowatch)
