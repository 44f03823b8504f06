# What `cmake --install` lays out, and the packages CPack makes of it:
#   bin/dsx                      the one binary (the libraries are static)
#   share/dsx/configs/           the shipped ds_configs (quickstart.json is the main job's)
#   share/dsx/cloud/             the node scripts and the Slurm batch file (also compiled in)
#   share/doc/dsx/               README.md and docs/
# `cpack -G DEB` makes dsx_<version>_<arch>.deb, whose Depends dpkg-shlibdeps reads off the
# binary, so they are the package names of the OS it was built on (Debian 12, Ubuntu 22.04 or
# 24.04); `cpack -G TGZ` makes the tarball `dsx cloud ... --dsx-package` also takes.
include(GNUInstallDirs)
if(DSX_CUDA_EMULATED)
  # Linked to the emulated GPU, a test fixture: nothing of this build is installed or packaged.
  message(STATUS "dsx: the emulated GPU build installs and packages nothing")
  return()
endif()

install(TARGETS dsx RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT dsx)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/dsx/configs
        COMPONENT dsx FILES_MATCHING PATTERN "*.json")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/cloud/aws ${PROJECT_SOURCE_DIR}/cloud/gcp
                  ${PROJECT_SOURCE_DIR}/cloud/node ${PROJECT_SOURCE_DIR}/cloud/slurm
        DESTINATION ${CMAKE_INSTALL_DATADIR}/dsx/cloud COMPONENT dsx)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT dsx)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT dsx)

set(CPACK_PACKAGE_NAME dsx)
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
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Launchers and peers dsx launch talks to, when the user has them.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "openssh-client, libfabric-bin")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "pdsh, openmpi-bin, slurm-client")
if(DSX_CUDA_ENABLED)
  # The CUDA libraries come from NVIDIA's repositories or the image, not from a Debian package
  # dpkg-shlibdeps could name: it leaves them out, and the package says which runtime it needs.
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CUDAToolkit_LIBRARY_DIR})
  set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
      "Built for CUDA ${CUDAToolkit_VERSION}: needs its runtime, cuBLAS, cuDNN and NCCL and an NVIDIA driver for that CUDA.")
endif()
include(CPack)
