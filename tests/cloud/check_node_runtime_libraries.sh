#!/usr/bin/env bash
# Every shared library the dsx binary links directly must come from a package that the cloud node
# script (cloud/node/common.sh, install_dsx_tree) installs; else a tarball install on a fresh node
# cannot start dsx. Packages every image has (the C and C++ runtimes, OpenSSL, zlib) are exempt.
# A package named by the script may be a prefix of the one found here (libopenblas0 installs
# libopenblas0-pthread). Needs dpkg: the build machine is Debian or Ubuntu.
set -euo pipefail
(($# == 2)) || { echo "usage: check_node_runtime_libraries.sh DSX_BINARY NODE_COMMON_SH" >&2; exit 2; }
binary=$1 script=$2
installed=$(sed -n '/^install_dsx_tree()/,/^}/p' "$script" | tr -s ' \\\n' '\n' | grep -E '^lib[a-z0-9.+-]+$' || true)
[[ -n $installed ]] || { echo "no apt-get package list found in install_dsx_tree of $script" >&2; exit 1; }
exempt=" libc6 libstdc++6 libgcc-s1 libssl3 zlib1g "
missing=0
while read -r soname path; do
  package=$(dpkg -S "$(realpath "$path")" 2>/dev/null | head -1 | cut -d: -f1) ||
    package=""
  [[ -n $package ]] || package=$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1 || true)
  [[ -n $package ]] || { echo "skip: $soname ($path) belongs to no package here"; continue; }
  [[ $exempt == *" $package "* ]] && continue
  found=""
  for name in $installed; do [[ $package == "$name"* ]] && found=$name; done
  if [[ -z $found ]]; then
    echo "missing: $soname comes from $package, which install_dsx_tree in $script does not install"
    missing=1
  fi
done < <(ldd "$binary" | awk '/=>/ {print $1, $3}' |
         grep -F -f <(readelf -d "$binary" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p'))
((missing == 0)) && echo "ok: every library dsx links is installed by $script"
exit "$missing"
