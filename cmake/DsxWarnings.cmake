# Every target of ours builds warning-free: warnings are errors (issue: foundation).
set(DSX_CXX_WARNINGS -Wall -Wextra -Werror)
# GCC 12 at -O3 reports overlapping memcpy inside libstdc++ for `"text" + std::string(...)`
# (GCC bug 105329, fixed in 13): a false alarm that would make Release builds fail.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12
   AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  list(APPEND DSX_CXX_WARNINGS -Wno-restrict)
endif()
set(DSX_CUDA_WARNINGS -Xcompiler=-Wall,-Wextra,-Werror --Werror=all-warnings)

function(dsx_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:${DSX_CXX_WARNINGS}>
    $<$<COMPILE_LANGUAGE:CUDA>:${DSX_CUDA_WARNINGS}>)
endfunction()
