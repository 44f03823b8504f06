# Third-party libraries. Each missing one stops configuration with the package that provides it;
# tools/setup.sh installs all of them.
find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)

function(dsx_missing what package)
  message(FATAL_ERROR "dsx: ${what} not found. Install it with `bash tools/setup.sh` "
                      "(Debian package: ${package}).")
endfunction()

find_path(RAPIDJSON_INCLUDE_DIR rapidjson/document.h)
if(NOT RAPIDJSON_INCLUDE_DIR)
  dsx_missing("RapidJSON" "rapidjson-dev")
endif()
add_library(dsx_rapidjson INTERFACE)
target_include_directories(dsx_rapidjson SYSTEM INTERFACE ${RAPIDJSON_INCLUDE_DIR})

find_package(Boost 1.74 QUIET COMPONENTS program_options)
if(NOT Boost_FOUND)
  dsx_missing("Boost.Program_options" "libboost-program-options-dev")
endif()

find_path(LIBFABRIC_INCLUDE_DIR rdma/fabric.h)
find_library(LIBFABRIC_LIBRARY fabric)
if(NOT LIBFABRIC_INCLUDE_DIR OR NOT LIBFABRIC_LIBRARY)
  dsx_missing("libfabric" "libfabric-dev")
endif()
add_library(dsx_libfabric INTERFACE)
target_include_directories(dsx_libfabric SYSTEM INTERFACE ${LIBFABRIC_INCLUDE_DIR})
target_link_libraries(dsx_libfabric INTERFACE ${LIBFABRIC_LIBRARY})

set(BLA_VENDOR OpenBLAS)
find_package(BLAS QUIET)
find_path(CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas openblas-pthread)
if(NOT BLAS_FOUND OR NOT CBLAS_INCLUDE_DIR)
  dsx_missing("OpenBLAS" "libopenblas-dev")
endif()
add_library(dsx_blas INTERFACE)
target_include_directories(dsx_blas SYSTEM INTERFACE ${CBLAS_INCLUDE_DIR})
target_link_libraries(dsx_blas INTERFACE ${BLAS_LIBRARIES})

# oneDNN (libdnnl-dev): the CPU's bf16 GEMMs (kernels/cpu/gemm_bf16.cpp). Optional: without it
# bf16 runs multiply in fp32, with a note.
find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
find_library(DNNL_LIBRARY dnnl)
add_library(dsx_dnnl INTERFACE)
if(DNNL_INCLUDE_DIR AND DNNL_LIBRARY)
  target_include_directories(dsx_dnnl SYSTEM INTERFACE ${DNNL_INCLUDE_DIR})
  target_link_libraries(dsx_dnnl INTERFACE ${DNNL_LIBRARY})
  target_compile_definitions(dsx_dnnl INTERFACE DSX_HAVE_DNNL=1)
else()
  message(STATUS "oneDNN not found (libdnnl-dev): bf16 GEMMs on the CPU will multiply in fp32")
endif()

if(DSX_BUILD_TESTS)
  find_package(GTest QUIET)
  if(NOT GTest_FOUND)
    dsx_missing("GoogleTest" "libgtest-dev libgmock-dev")
  endif()
endif()
if(DSX_BUILD_BENCH)
  find_package(benchmark QUIET)
  if(NOT benchmark_FOUND)
    dsx_missing("Google Benchmark" "libbenchmark-dev")
  endif()
endif()

# Tokenizers (tokenizer/): PCRE2 runs the pre-tokenizer regexes, utf8proc normalizes (NFC) and
# classifies characters, libsentencepiece reads tokenizer.model files. find_path/find_library
# rather than pkg-config, so tests/gpu/gpu_deps.sh's private prefix is searched too.
foreach(dep IN ITEMS "pcre2;pcre2.h;pcre2-8;PCRE2;libpcre2-dev"
                     "utf8proc;utf8proc.h;utf8proc;utf8proc;libutf8proc-dev"
                     "sentencepiece;sentencepiece_processor.h;sentencepiece;SentencePiece;libsentencepiece-dev")
  list(GET dep 0 name)
  list(GET dep 1 header)
  list(GET dep 2 library)
  list(GET dep 3 what)
  list(GET dep 4 package)
  find_path(DSX_${name}_INCLUDE_DIR ${header})
  find_library(DSX_${name}_LIBRARY ${library})
  if(NOT DSX_${name}_INCLUDE_DIR OR NOT DSX_${name}_LIBRARY)
    dsx_missing("${what}" "${package}")
  endif()
  add_library(dsx_${name} INTERFACE)
  target_include_directories(dsx_${name} SYSTEM INTERFACE ${DSX_${name}_INCLUDE_DIR})
  target_link_libraries(dsx_${name} INTERFACE ${DSX_${name}_LIBRARY})
endforeach()
