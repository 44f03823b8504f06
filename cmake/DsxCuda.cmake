# DSX_CUDA=AUTO|ON|OFF|EMULATED. Sets DSX_CUDA_ENABLED and, when on, the targets
# CUDA::cudart, CUDA::cublas, CUDA::cublasLt, dsx_cudnn, dsx_cudnn_frontend and dsx_nccl.
# EMULATED (tests only, never packaged): the CUDA sources built by the host compiler against the
# real CUDA headers and linked to the emulated GPU of tests/emulated_gpu instead of the CUDA
# libraries (DSX_CUDA_EMULATED).
include(CheckLanguage)
set(DSX_CUDA_ENABLED OFF)
set(DSX_CUDA_EMULATED OFF)
if(DSX_CUDA STREQUAL "EMULATED")
  include(DsxEmulatedGpu)
  return()
endif()
if(NOT DSX_CUDA STREQUAL "OFF")
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(DSX_CUDA_ENABLED ON)
    # Refuse a CUDA older than 12.4 before enable_language() commits to it; with AUTO the
    # configuration goes on without CUDA. (A compiler whose --version names no release, such as
    # clang, is checked through the toolkit's version below.)
    execute_process(COMMAND "${CMAKE_CUDA_COMPILER}" --version OUTPUT_VARIABLE _dsx_nvcc_version
                    ERROR_QUIET RESULT_VARIABLE _dsx_nvcc_rc)
    if(_dsx_nvcc_rc EQUAL 0 AND _dsx_nvcc_version MATCHES "release ([0-9]+\\.[0-9]+)")
      set(_dsx_nvcc_release ${CMAKE_MATCH_1})
      if(_dsx_nvcc_release VERSION_LESS 12.4)
        string(CONCAT _dsx_old "dsx: ${CMAKE_CUDA_COMPILER} is CUDA ${_dsx_nvcc_release}; dsx "
               "needs CUDA 12.4 or newer (12.x or 13.x). Point CMAKE_CUDA_COMPILER at a newer nvcc")
        if(DSX_CUDA STREQUAL "ON")
          message(FATAL_ERROR "${_dsx_old}, or configure with -DDSX_CUDA=OFF.")
        endif()
        message(WARNING "${_dsx_old}; building without CUDA.")
        set(DSX_CUDA_ENABLED OFF)
      endif()
    endif()
  elseif(DSX_CUDA STREQUAL "ON")
    message(FATAL_ERROR "dsx: DSX_CUDA=ON but no nvcc was found. Put the CUDA toolkit's bin/ on "
                        "PATH (or set CMAKE_CUDA_COMPILER), or configure with -DDSX_CUDA=OFF.")
  endif()
endif()

if(DSX_CUDA_ENABLED)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    # A100 (sm_80) and H100/H200 (sm_90): the GPUs of p4d/p5 and a2/a3.
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  # CMake 3.25 knows no C++20 flag for nvcc 13; .cu files are C++17.
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  if(CUDAToolkit_VERSION VERSION_LESS 12.4)
    message(FATAL_ERROR "dsx: the CUDA toolkit at ${CUDAToolkit_BIN_DIR} is "
                        "${CUDAToolkit_VERSION}; dsx needs CUDA 12.4 or newer (12.x or 13.x), "
                        "or -DDSX_CUDA=OFF.")
  endif()
  # The runtime headers' own version (CUDART_VERSION), which decides the code's
  # `#if CUDART_VERSION >= 13000` paths. It is the compiler's except in a prefix such as
  # tools/cuda12_prefix.sh makes: CUDA 12.9's headers and libraries, a CUDA 13 compiler.
  find_file(DSX_CUDA_RUNTIME_API_H cuda_runtime_api.h PATHS ${CUDAToolkit_INCLUDE_DIRS}
            NO_DEFAULT_PATH)
  set(DSX_CUDART_VERSION "")
  if(DSX_CUDA_RUNTIME_API_H)
    file(STRINGS "${DSX_CUDA_RUNTIME_API_H}" _dsx_cudart REGEX "^#define CUDART_VERSION +[0-9]+")
    if(_dsx_cudart MATCHES "([0-9]+)$")
      math(EXPR _dsx_major "${CMAKE_MATCH_1} / 1000")
      math(EXPR _dsx_minor "${CMAKE_MATCH_1} % 1000 / 10")
      set(DSX_CUDART_VERSION "${_dsx_major}.${_dsx_minor}")
    endif()
  endif()
  if(DSX_CUDART_VERSION AND DSX_CUDART_VERSION VERSION_LESS 12.4)
    message(FATAL_ERROR "dsx: ${DSX_CUDA_RUNTIME_API_H} is CUDA ${DSX_CUDART_VERSION}'s "
                        "runtime; dsx needs CUDA 12.4 or newer (12.x or 13.x), or -DDSX_CUDA=OFF.")
  endif()
  message(STATUS "dsx: CUDA compiler ${CMAKE_CUDA_COMPILER_VERSION} (${CMAKE_CUDA_COMPILER}), "
                 "runtime headers and libraries ${DSX_CUDART_VERSION} (${CUDAToolkit_LIBRARY_DIR})")

  find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(NOT CUDNN_INCLUDE_DIR OR NOT CUDNN_LIBRARY)
    message(FATAL_ERROR "dsx: CUDA is on but cuDNN (cudnn.h, libcudnn) was not found.")
  endif()
  if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
    message(FATAL_ERROR "dsx: CUDA is on but NCCL (nccl.h, libnccl) was not found.")
  endif()
  add_library(dsx_cudnn INTERFACE)
  target_include_directories(dsx_cudnn SYSTEM INTERFACE ${CUDNN_INCLUDE_DIR})
  target_link_libraries(dsx_cudnn INTERFACE ${CUDNN_LIBRARY})
  # cudnn-frontend (header-only, pinned in tools/cudnn_frontend.sh): DSX_CUDNN_FRONTEND_DIR names
  # a folder with cudnn_frontend.h (or its include/); else the script fetches it into
  # .cache/cudnn-frontend, or takes the copy tests/gpu/prepare.sh put in gpu-deps/ (or
  # $DSX_GPU_DEPS) for machines without a network: the script downloads nothing when a copy's
  # stamp names the pinned wheel, and fetches it afresh when the pin changed.
  set(DSX_CUDNN_FRONTEND_DIR "" CACHE PATH
      "A folder with cudnn_frontend.h (default: what tools/cudnn_frontend.sh fetches)")
  set(_dsx_fe_script ${PROJECT_SOURCE_DIR}/tools/cudnn_frontend.sh)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_dsx_fe_script})
  if(DSX_CUDNN_FRONTEND_DIR)
    set(_dsx_fe_hints ${DSX_CUDNN_FRONTEND_DIR} ${DSX_CUDNN_FRONTEND_DIR}/include)
  else()
    set(_dsx_fe_dest ${PROJECT_SOURCE_DIR}/.cache/cudnn-frontend)
    foreach(_dsx_deps $ENV{DSX_GPU_DEPS} ${PROJECT_SOURCE_DIR}/gpu-deps)
      if(EXISTS ${_dsx_deps}/cudnn-frontend/.dsx-cudnn-frontend-stamp)
        set(_dsx_fe_dest ${_dsx_deps}/cudnn-frontend)
        break()
      endif()
    endforeach()
    execute_process(COMMAND bash ${_dsx_fe_script} ${_dsx_fe_dest} RESULT_VARIABLE _dsx_fe_rc
                    OUTPUT_VARIABLE _dsx_fe_out ERROR_VARIABLE _dsx_fe_out)
    if(NOT _dsx_fe_rc EQUAL 0)
      message(FATAL_ERROR "dsx: CUDA is on and needs NVIDIA's cudnn-frontend headers, which "
              "`bash tools/cudnn_frontend.sh ${_dsx_fe_dest}` fetches from PyPI; it failed:\n"
              "${_dsx_fe_out}\nRun it where PyPI is reachable, or configure with "
              "-DDSX_CUDNN_FRONTEND_DIR=<a folder with cudnn_frontend.h>, or -DDSX_CUDA=OFF.")
    endif()
    set(_dsx_fe_hints ${_dsx_fe_dest}/include)
  endif()
  # Not cached: a changed DSX_CUDNN_FRONTEND_DIR or a copy in gpu-deps/ is found afresh.
  find_path(_dsx_fe_include cudnn_frontend.h PATHS ${_dsx_fe_hints} NO_DEFAULT_PATH NO_CACHE)
  if(NOT _dsx_fe_include)
    message(FATAL_ERROR "dsx: no cudnn_frontend.h in ${_dsx_fe_hints} (DSX_CUDNN_FRONTEND_DIR, "
                        "or `bash tools/cudnn_frontend.sh` to fetch it).")
  endif()
  file(STRINGS ${_dsx_fe_include}/cudnn_frontend_version.h _dsx_fe_version
       REGEX "^#define CUDNN_FRONTEND_(MAJOR|MINOR|PATCH)_VERSION")
  string(REGEX REPLACE "[^;]*VERSION +([0-9]+)" "\\1" _dsx_fe_version "${_dsx_fe_version}")
  string(REPLACE ";" "." _dsx_fe_version "${_dsx_fe_version}")
  message(STATUS "dsx: cudnn-frontend ${_dsx_fe_version} (${_dsx_fe_include})")
  add_library(dsx_cudnn_frontend INTERFACE)
  target_include_directories(dsx_cudnn_frontend SYSTEM INTERFACE ${_dsx_fe_include})
  target_link_libraries(dsx_cudnn_frontend INTERFACE dsx_cudnn)
  add_library(dsx_nccl INTERFACE)
  target_include_directories(dsx_nccl SYSTEM INTERFACE ${NCCL_INCLUDE_DIR})
  target_link_libraries(dsx_nccl INTERFACE ${NCCL_LIBRARY})
endif()
