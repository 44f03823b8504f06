# The files Debian policy asks of every package beyond what dsx itself installs, made from
# cmake/deb/ at configure time:
#   <docdir>/copyright                 machine-readable (DEP-5); a CUDA build adds cudnn-frontend's
#                                      paragraph, as its headers are compiled into the binary
#   <docdir>/changelog.Debian.gz       cmake/deb/changelog, whose first entry must be this version
#   share/man/man1/dsx.1.gz            the manual page
#   share/lintian/overrides/<package>  the lintian tags that do not apply, each with its reason
# gzip -9n: maximal compression and no time stamp, as lintian checks.

# dsx_deb_files(DOCDIR): makes them and installs them into the dsx component.
function(dsx_deb_files docdir)
  set(src ${PROJECT_SOURCE_DIR}/cmake/deb)
  set(out ${PROJECT_BINARY_DIR}/deb)
  file(MAKE_DIRECTORY ${out})
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
               ${src}/copyright ${src}/copyright-cudnn-frontend ${src}/changelog ${src}/dsx.1
               ${src}/lintian-overrides.in)

  file(READ ${src}/copyright copyright)
  if(DSX_CUDA_ENABLED)
    file(READ ${src}/copyright-cudnn-frontend cudnn_frontend)
    string(APPEND copyright "${cudnn_frontend}")
  endif()
  file(WRITE ${out}/copyright "${copyright}")

  # A version bump without a changelog entry would ship a changelog that contradicts the package.
  file(STRINGS ${src}/changelog first LIMIT_COUNT 1)
  set(version "${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}")
  if(NOT first MATCHES "^dsx \\(${version}\\) ")
    message(FATAL_ERROR "dsx: cmake/deb/changelog begins with '${first}'; its first entry must be "
                        "dsx (${version}): add one for this version.")
  endif()
  foreach(pair "changelog;changelog.Debian.gz" "dsx.1;dsx.1.gz")
    list(GET pair 0 from)
    list(GET pair 1 to)
    execute_process(COMMAND gzip -9nc ${src}/${from} OUTPUT_FILE ${out}/${to} RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "dsx: gzip -9nc cmake/deb/${from} failed")
    endif()
  endforeach()

  install(FILES ${out}/copyright ${out}/changelog.Debian.gz DESTINATION ${docdir} COMPONENT dsx)
  install(FILES ${out}/dsx.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT dsx)
  configure_file(${src}/lintian-overrides.in ${out}/lintian-overrides/${DSX_PACKAGE_NAME} @ONLY)
  install(FILES ${out}/lintian-overrides/${DSX_PACKAGE_NAME}
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides COMPONENT dsx)
endfunction()
