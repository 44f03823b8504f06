#!/usr/bin/env bash
# Configures and builds dsx into build/ (or $DSX_BUILD_DIR). Extra arguments go to cmake, e.g.
#   bash tools/build.sh -DDSX_CUDA=OFF
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${DSX_BUILD_DIR:-build}
# tools/setup.sh puts a newer cmake in .cache/cmake where the system's is too old (Ubuntu 22.04).
[[ -x .cache/cmake/bin/cmake ]] && PATH=$PWD/.cache/cmake/bin:$PATH
cmake -S . -B "$build_dir" "$@" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
