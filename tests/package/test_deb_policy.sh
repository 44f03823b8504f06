#!/usr/bin/env bash
# cpack makes the .deb of this build into a temporary folder; check_deb.sh checks it.
# Usage: test_deb_policy.sh BUILD_DIR cpu|cuda
set -euo pipefail
build=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp" >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log"; echo "FAIL: cpack -G DEB failed" >&2; exit 1; }
deb=$(find "$tmp" -maxdepth 1 -name '*.deb' | head -1)
[[ -n $deb ]] || { echo "FAIL: cpack wrote no .deb: $(ls "$tmp")" >&2; exit 1; }
bash "$(dirname "$0")/check_deb.sh" "$deb" "$2"
