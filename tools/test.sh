#!/usr/bin/env bash
# The README's test command: installs what is missing, builds the CPU configuration and runs every
# test that does not need a GPU; then builds the CUDA sources for the emulated GPU
# (-DDSX_CUDA=EMULATED, tests/emulated_gpu) and runs every GPU test on it, on one emulated GPU and
# the multi-GPU ones again on two. Ends with ctest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
DSX_BUILD_DIR=${DSX_BUILD_DIR:-build} bash tools/build.sh -DDSX_CUDA=OFF -DDSX_BUILD_TESTS=ON -DDSX_BUILD_BENCH=ON
[[ -x .cache/cmake/bin/ctest ]] && PATH=$PWD/.cache/cmake/bin:$PATH  # as build.sh
root=$PWD
(cd "${DSX_BUILD_DIR:-build}" && ctest --output-on-failure -j "$(nproc)" --timeout 600)

# The GPU code on the emulated GPU needs the CUDA headers: a toolkit's, else CUDA 12.9's from
# PyPI (tools/cuda_headers.sh, into .cache/cuda-headers, once).
have_cuda_headers() {  # where cmake/DsxEmulatedGpu.cmake looks
  local dir
  for dir in /usr/local/cuda/include .cache/cuda12/include .cache/cuda-headers/include; do
    [[ -f $dir/cuda_runtime_api.h ]] && return 0
  done
  return 1
}
have_cuda_headers || bash tools/cuda_headers.sh
emulated=${DSX_EMULATED_BUILD_DIR:-build-emulated}
[[ -x .cache/cmake/bin/cmake ]] && PATH=$PWD/.cache/cmake/bin:$PATH
cmake -S . -B "$emulated" -DDSX_CUDA=EMULATED -DDSX_BUILD_TESTS=ON -DDSX_BUILD_BENCH=OFF >/dev/null
cmake --build "$emulated" -j "$(nproc)" --target dsx_emulated_gpu_check
cd "$emulated"
# Two emulated GPUs for the tests that need them (each skips with one), then everything on one.
DSX_EMULATED_GPUS=2 ctest --output-on-failure -j "$(nproc)" --timeout 900 -L gpu \
  -R 'TwoRanks|TwoGpus|GpuZeroNccl|DeviceResidentZeroGivesTheCpusWeightsAtEveryStage'
ctest --output-on-failure -j "$(nproc)" --timeout 900 -L gpu
cd "$root"
