# dsx-cuda's Depends, from the versions a CUDA build reads off its headers: NVIDIA's apt names
# for CUDA 13.0 and 12.9 builds, and the NCCL version read as from nccl.h.
# Runs without CUDA: cmake -DDSX_SOURCE_DIR=<repo> -P test_cuda_depends.cmake
include(${DSX_SOURCE_DIR}/cmake/DsxDebCudaDepends.cmake)

function(expect actual expected)
  if(NOT actual STREQUAL expected)
    message(FATAL_ERROR "got\n  ${actual}\nexpected\n  ${expected}")
  endif()
endfunction()

dsx_deb_cuda_depends(d 13.0 2.28.9 9.19.0)
expect("${d}" "cuda-cudart-13-0, libcublas-13-0, libcudnn9-cuda-13 (>= 9.19.0), libnccl2 (>= 2.28.9)")
dsx_deb_cuda_depends(d 12.9 2.32.3 9.28.0)
expect("${d}" "cuda-cudart-12-9, libcublas-12-9, libcudnn9-cuda-12 (>= 9.28.0), libnccl2 (>= 2.32.3)")

# The versions as a CUDA build reads them: nccl.h and cudnn_version.h's #defines.
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/nccl.h "#define NCCL_MAJOR 2\n#define NCCL_MINOR 28\n#define NCCL_PATCH 9\n#define NCCL_SUFFIX \"\"\n")
dsx_header_version(v ${CMAKE_CURRENT_BINARY_DIR}/nccl.h NCCL_ MAJOR MINOR PATCH)
expect("${v}" "2.28.9")
file(REMOVE ${CMAKE_CURRENT_BINARY_DIR}/nccl.h)
message(STATUS "PASS: dsx-cuda's Depends name NVIDIA's packages for the CUDA built with")
