# DSX_CUDA=EMULATED: every CUDA source of dsx compiled by the host compiler against the real CUDA
# headers (the toolkit's, or CUDA 12.9's from PyPI that tools/cuda_headers.sh lays out) and
# linked to tests/emulated_gpu, which stands in for libcudart, libcublasLt and libnccl. cuDNN is
# not emulated: dsx_cudnn is empty and the models' own attention kernels run.
set(DSX_CUDA_ENABLED ON)
set(DSX_CUDA_EMULATED ON)
set(DSX_CUDA_HEADERS "" CACHE PATH "A folder with cuda_runtime_api.h, cublasLt.h and nccl.h")
find_path(DSX_CUDA_INCLUDE_DIR cuda_runtime_api.h
          PATHS ${DSX_CUDA_HEADERS} ${CUDAToolkit_ROOT}/include /usr/local/cuda/include
                ${PROJECT_SOURCE_DIR}/.cache/cuda12/include
                ${PROJECT_SOURCE_DIR}/.cache/cuda-headers/include
          NO_DEFAULT_PATH)
foreach(header cublasLt.h nccl.h)
  find_path(_dsx_has_${header} ${header}
            PATHS ${DSX_CUDA_INCLUDE_DIR} ${DSX_CUDA_HEADERS} /usr/include NO_DEFAULT_PATH NO_CACHE)
  if(NOT _dsx_has_${header})
    set(DSX_CUDA_INCLUDE_DIR _dsx_missing-NOTFOUND)
  endif()
endforeach()
if(NOT DSX_CUDA_INCLUDE_DIR)
  message(FATAL_ERROR "dsx: DSX_CUDA=EMULATED needs the CUDA headers (cuda_runtime_api.h, cublasLt.h, "
                      "nccl.h): install the CUDA toolkit, or lay out CUDA 12.9's from PyPI with "
                      "`bash tools/cuda_headers.sh` (into .cache/cuda-headers), or name a folder "
                      "with -DDSX_CUDA_HEADERS=DIR.")
endif()
file(STRINGS "${DSX_CUDA_INCLUDE_DIR}/cuda_runtime_api.h" _dsx_cudart REGEX "^#define CUDART_VERSION +[0-9]+")
string(REGEX MATCH "[0-9]+$" DSX_CUDART_NUMBER "${_dsx_cudart}")
message(STATUS "dsx: CUDA EMULATED: headers ${DSX_CUDA_INCLUDE_DIR} (CUDART_VERSION ${DSX_CUDART_NUMBER}); "
               "GPUs, cudart, cuBLASLt and NCCL from tests/emulated_gpu")
add_subdirectory(${PROJECT_SOURCE_DIR}/tests/emulated_gpu ${PROJECT_BINARY_DIR}/emulated_gpu)
add_library(CUDA::cudart ALIAS dsx_emulated_gpu)
add_library(CUDA::cublasLt ALIAS dsx_emulated_gpu)
add_library(CUDA::cublas ALIAS dsx_emulated_gpu)
add_library(dsx_nccl ALIAS dsx_emulated_gpu)
add_library(dsx_cudnn INTERFACE)

# How a .cu file compiles here: as C++ with the emulator's prelude (the CUDA qualifiers, built-in
# variables and intrinsics nvcc would give); nvcc's `#pragma unroll` means nothing to g++.
set(DSX_EMULATED_CU_OPTIONS -x c++ -include ${PROJECT_SOURCE_DIR}/tests/emulated_gpu/prelude.h
    -Wno-unknown-pragmas)
# dsx_cuda_sources(<target> <sources>): gives the .cu files among them those options.
function(dsx_cuda_sources target)
  foreach(source ${ARGN})
    if(source MATCHES "\\.cu$")
      set_source_files_properties(${source} TARGET_DIRECTORY ${target} PROPERTIES LANGUAGE CXX
        COMPILE_OPTIONS "${DSX_EMULATED_CU_OPTIONS}")
    endif()
  endforeach()
endfunction()
