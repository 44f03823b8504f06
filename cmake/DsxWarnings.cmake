# Every target of ours builds warning-free: warnings are errors (issue: foundation).
set(DSX_CXX_WARNINGS -Wall -Wextra -Werror)
set(DSX_CUDA_WARNINGS -Xcompiler=-Wall,-Wextra,-Werror --Werror=all-warnings)

function(dsx_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:${DSX_CXX_WARNINGS}>
    $<$<COMPILE_LANGUAGE:CUDA>:${DSX_CUDA_WARNINGS}>)
endfunction()
