# Sourced by tests/gpu/run.sh and tests/gpu/prepare.sh: the Debian packages that prepare.sh
# downloaded (a folder of .debs), unpacked into a private prefix, with CMake, the linker and the
# loader pointed at it. For GPU machines whose image has CUDA but none of the libraries that
# tools/setup.sh installs, and no package registry to install them from.

# gpu_deps_use <folder of .debs> <prefix>: unpacks (again only when the .debs changed) and
# exports CMAKE_PREFIX_PATH, CMAKE_LIBRARY_PATH, CMAKE_INCLUDE_PATH, CPATH, PKG_CONFIG_PATH and
# LD_LIBRARY_PATH with the prefix first.
gpu_deps_use() {
  local debs=$1 prefix=$2 stamp deb dir
  stamp=$(cd "$debs" && ls -l -- *.deb)
  if [[ ! -f $prefix/.unpacked || $(<"$prefix/.unpacked") != "$stamp" ]]; then
    rm -rf "$prefix"
    mkdir -p "$prefix"
    for deb in "$debs"/*.deb; do
      if command -v dpkg-deb >/dev/null; then
        dpkg-deb -x "$deb" "$prefix"
      else
        gpu_deps_unpack_without_dpkg "$deb" "$prefix"
      fi
    done
    # Debian's alternatives (libpsm_infinipath, openblas) name a library by a link that
    # dpkg-deb -x does not make: ldconfig -n makes each folder's soname links.
    while IFS= read -r dir; do ldconfig -n "$dir" 2>/dev/null || true; done < <(gpu_deps_lib_dirs "$prefix")
    printf '%s\n' "$stamp" >"$prefix/.unpacked"
  fi
  local usr=$prefix/usr arch_lib=$prefix/usr/lib/x86_64-linux-gnu lib_path
  lib_path=$(gpu_deps_lib_dirs "$prefix" | paste -sd:)
  # lib/x86_64-linux-gnu/cmake as a prefix of its own finds the config files where the
  # compiler is not a Debian multiarch one (no CMAKE_LIBRARY_ARCHITECTURE).
  export CMAKE_PREFIX_PATH=$usr:$arch_lib/cmake${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export CMAKE_LIBRARY_PATH=$lib_path${CMAKE_LIBRARY_PATH:+:$CMAKE_LIBRARY_PATH}
  export CMAKE_INCLUDE_PATH=$usr/include:$usr/include/x86_64-linux-gnu${CMAKE_INCLUDE_PATH:+:$CMAKE_INCLUDE_PATH}
  # Debian keeps arch-specific headers (openssl/opensslconf.h) in include/x86_64-linux-gnu, which
  # the compiler searches by itself only under /usr.
  export CPATH=$usr/include/x86_64-linux-gnu${CPATH:+:$CPATH}
  export PKG_CONFIG_PATH=$arch_lib/pkgconfig:$usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  export LD_LIBRARY_PATH=$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
}

# gpu_deps_lib_dirs <prefix>: the folders that hold shared libraries (not plugin folders).
gpu_deps_lib_dirs() {
  find "$1" -name 'lib*.so*' \( -type f -o -type l \) -printf '%h\n' | sort -u |
    grep -vE '/(libibverbs|ossl-modules|engines-3)$'
}

# gpu_deps_unpack_without_dpkg <deb> <prefix>: a .deb is an ar archive whose files are in
# data.tar.{xz,zst,gz}; for images without dpkg.
gpu_deps_unpack_without_dpkg() {
  local member
  member=$(ar t "$1" | grep '^data\.tar')
  case $member in
    *.xz) ar p "$1" "$member" | tar -xJ -C "$2" -f - ;;
    *.zst) ar p "$1" "$member" | tar --zstd -x -C "$2" -f - ;;
    *.gz) ar p "$1" "$member" | tar -xz -C "$2" -f - ;;
    *) echo "gpu_deps: $1: unknown member '$member'" >&2 && return 1 ;;
  esac
}
