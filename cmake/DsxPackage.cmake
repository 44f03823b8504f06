# What `cmake --install` lays out, and the packages CPack makes of it:
#   bin/dsx                      the one binary (the libraries are static)
#   share/dsx/configs/           the shipped ds_configs (quickstart.json is the main job's)
#   share/dsx/cloud/             the node scripts and the Slurm batch file (also compiled in)
#   share/doc/<package>/         README.md, docs/, copyright, changelog.Debian.gz
#   share/man/man1/dsx.1.gz      the manual page
# The package is `dsx` for a CPU build and `dsx-cuda` for a CUDA build; each conflicts with and
# replaces the other, as both install /usr/bin/dsx. `cpack -G DEB` makes
# <package>_<version>-<release>_<arch>.deb. Its Depends on the OS's libraries dpkg-shlibdeps
# reads off the binary, so they are the package names of the OS it was built on (Debian 12,
# Ubuntu 22.04 or 24.04); dsx-cuda adds the CUDA libraries by NVIDIA's package names
# (DsxDebCudaDepends.cmake). `cpack -G TGZ` makes the tarball `dsx cloud ... --dsx-package` also
# takes. The files only the .deb needs (copyright, changelog, manual page) are in cmake/deb/.
include(GNUInstallDirs)
if(DSX_CUDA_EMULATED)
  # Linked to the emulated GPU, a test fixture: nothing of this build is installed or packaged.
  message(STATUS "dsx: the emulated GPU build installs and packages nothing")
  return()
endif()

# `cmake --install` and cpack install what is built and build nothing first: the package needs
# only dsx, and building `all` (every test and benchmark) before packaging takes a CUDA build
# many minutes.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
install(TARGETS dsx RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT dsx)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/dsx/configs
        COMPONENT dsx FILES_MATCHING PATTERN "*.json")
# The Slurm batch file starts with #!: executable, as lintian asks of scripts. The node scripts
# are sourced or sent as user data, and have no #! line.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/cloud/aws ${PROJECT_SOURCE_DIR}/cloud/gcp
                  ${PROJECT_SOURCE_DIR}/cloud/node ${PROJECT_SOURCE_DIR}/cloud/slurm
        DESTINATION ${CMAKE_INSTALL_DATADIR}/dsx/cloud COMPONENT dsx
        PATTERN "*.sbatch" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
                                       GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
if(DSX_CUDA_ENABLED)
  set(DSX_PACKAGE_NAME dsx-cuda)
  set(_dsx_other_package dsx)
else()
  set(DSX_PACKAGE_NAME dsx)
  set(_dsx_other_package dsx-cuda)
endif()
# Debian's place for a package's documents is /usr/share/doc/<package>.
set(_dsx_docdir ${CMAKE_INSTALL_DATAROOTDIR}/doc/${DSX_PACKAGE_NAME})
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${_dsx_docdir} COMPONENT dsx)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${_dsx_docdir} COMPONENT dsx)
# Debian revision 1: a version with a revision is a non-native package, whose changelog is
# changelog.Debian.gz (cmake/deb/changelog's first entry must name this version).
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
include(DsxDebFiles)
dsx_deb_files(${_dsx_docdir})

set(CPACK_PACKAGE_NAME ${DSX_PACKAGE_NAME})
set(CPACK_PACKAGE_VENDOR "dsx")
set(CPACK_PACKAGE_CONTACT "dsx maintainers <maintainers@dsx.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "training engine that reads DeepSpeed's ds_config (ZeRO 0-3, NCCL or libfabric)")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
# The tarball unpacks to bin/, share/ at its root, as the node scripts unpack it into /opt/dsx.
set(CPACK_INCLUDE_TOPLEVEL_DIRECTORY OFF)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SOURCE dsx)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_PACKAGE_CONFLICTS ${_dsx_other_package})
set(CPACK_DEBIAN_PACKAGE_REPLACES ${_dsx_other_package})
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Launchers and peers dsx launch talks to, when the user has them.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "openssh-client, libfabric-bin")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "pdsh, openmpi-bin, slurm-client")
# The extended description: lines under 80 characters, as lintian asks.
string(CONCAT CPACK_DEBIAN_PACKAGE_DESCRIPTION
       "dsx trains GPT-2 and Llama-family models from a DeepSpeed ds_config with\n"
       "ZeRO stages 0-3, and launches jobs like DeepSpeed's launcher.\n")
if(DSX_CUDA_ENABLED)
  # dpkg-shlibdeps finds no package for the CUDA libraries (they are not Debian's): it skips
  # them, and the Depends name them by NVIDIA's packages.
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CUDAToolkit_LIBRARY_DIR})
  include(DsxDebCudaDepends)
  set(_dsx_cudart ${DSX_CUDART_VERSION})
  if(NOT _dsx_cudart)
    set(_dsx_cudart ${CUDAToolkit_VERSION})
  endif()
  dsx_header_version(_dsx_nccl ${NCCL_INCLUDE_DIR}/nccl.h NCCL_ MAJOR MINOR PATCH)
  dsx_header_version(_dsx_cudnn ${CUDNN_INCLUDE_DIR}/cudnn_version.h CUDNN_ MAJOR MINOR PATCHLEVEL)
  dsx_deb_cuda_depends(CPACK_DEBIAN_PACKAGE_DEPENDS ${_dsx_cudart} ${_dsx_nccl} ${_dsx_cudnn})
  string(APPEND CPACK_DEBIAN_PACKAGE_DESCRIPTION
         "This is the build for NVIDIA GPUs with CUDA ${_dsx_cudart}: it needs a driver for that\n"
         "CUDA, and CUDA's runtime, cuBLAS, cuDNN and NCCL from NVIDIA's CUDA apt\n"
         "repository. The package dsx is the CPU build.")
else()
  string(APPEND CPACK_DEBIAN_PACKAGE_DESCRIPTION
         "This is the CPU build. The package dsx-cuda is the build for NVIDIA GPUs.")
endif()
include(CPack)
