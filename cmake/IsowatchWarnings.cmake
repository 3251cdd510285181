# SPDX-License-Identifier: Apache-2.0
# isowatch_warnings(target): the warning set for isowatch's own code.
function(isowatch_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
    -Wnon-virtual-dtor -Wimplicit-fallthrough -Werror=unused-result -Wno-missing-field-initializers)
  if(ISOWATCH_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
