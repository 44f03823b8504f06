# The Depends of the dsx-cuda package: the CUDA libraries the binary links, by the package names
# of NVIDIA's CUDA apt repository (dpkg-shlibdeps cannot name them: no Debian package owns them).
#   CUDA runtime, cuBLAS(Lt)  cuda-cudart-<major>-<minor>, libcublas-<major>-<minor>
#                             (NVIDIA names them per CUDA release)
#   cuDNN                     libcudnn<major>-cuda-<CUDA major>, at least the version built with
#   NCCL                      libnccl2, at least the version built with (one name for every CUDA)
# Without them installed, the binary cannot start (`libnccl.so.2: cannot open shared object file`).

# dsx_deb_cuda_depends(OUT CUDART_VERSION NCCL_VERSION CUDNN_VERSION): OUT is the Depends line,
# from "major.minor" of the CUDA runtime and "major.minor.patch" of NCCL and cuDNN.
function(dsx_deb_cuda_depends out cudart_version nccl_version cudnn_version)
  if(NOT cudart_version MATCHES "^([0-9]+)\\.([0-9]+)")
    message(FATAL_ERROR "dsx: CUDA runtime version '${cudart_version}' is not major.minor")
  endif()
  set(cuda "${CMAKE_MATCH_1}-${CMAKE_MATCH_2}")
  set(cuda_major ${CMAKE_MATCH_1})
  if(NOT nccl_version MATCHES "^[0-9]+\\.[0-9]+\\.[0-9]+$")
    message(FATAL_ERROR "dsx: NCCL version '${nccl_version}' is not major.minor.patch")
  endif()
  if(NOT cudnn_version MATCHES "^([0-9]+)\\.[0-9]+\\.[0-9]+$")
    message(FATAL_ERROR "dsx: cuDNN version '${cudnn_version}' is not major.minor.patch")
  endif()
  set(cudnn_major ${CMAKE_MATCH_1})
  set(${out} "cuda-cudart-${cuda}, libcublas-${cuda}, libcudnn${cudnn_major}-cuda-${cuda_major} (>= ${cudnn_version}), libnccl2 (>= ${nccl_version})" PARENT_SCOPE)
endfunction()

# dsx_header_version(OUT HEADER PREFIX NAMES...): "a.b.c" from the header's `#define
# <PREFIX><NAME> <number>` lines (nccl.h: NCCL_ MAJOR MINOR PATCH).
function(dsx_header_version out header prefix)
  set(parts "")
  foreach(name IN LISTS ARGN)
    file(STRINGS "${header}" line REGEX "^#define ${prefix}${name} +[0-9]+")
    if(NOT line MATCHES "([0-9]+)$")
      message(FATAL_ERROR "dsx: ${header} has no `#define ${prefix}${name}`")
    endif()
    list(APPEND parts ${CMAKE_MATCH_1})
  endforeach()
  list(JOIN parts "." version)
  set(${out} ${version} PARENT_SCOPE)
endfunction()
