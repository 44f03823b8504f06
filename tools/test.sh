#!/usr/bin/env bash
# The README's test command: installs what is missing, builds the CPU configuration, runs every
# test that does not need a GPU, and ends with ctest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
DSX_BUILD_DIR=${DSX_BUILD_DIR:-build} bash tools/build.sh -DDSX_CUDA=OFF -DDSX_BUILD_TESTS=ON -DDSX_BUILD_BENCH=ON
[[ -x .cache/cmake/bin/ctest ]] && PATH=$PWD/.cache/cmake/bin:$PATH  # as build.sh
cd "${DSX_BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" --timeout 600
