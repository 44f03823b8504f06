#!/usr/bin/env bash
# Lays out the CUDA 12.9 headers the emulated GPU build (-DDSX_CUDA=EMULATED) compiles against,
# for machines without a CUDA toolkit: the runtime's, cuBLASLt's, NCCL's, CCCL's and the compiler's
# crt headers, from PyPI's wheels (pip download, no virtual environment), merged in PREFIX/include
# (default .cache/cuda-headers, ignored by git). No library is kept: the emulated GPU stands in
# for them. Safe to run twice: a complete prefix (its stamp names the same wheels) is kept.
#   bash tools/cuda_headers.sh [PREFIX]
#   cmake -S . -B build-emulated -DDSX_CUDA=EMULATED -DDSX_CUDA_HEADERS=PREFIX/include
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
prefix=$(realpath -m "${1:-$repo/.cache/cuda-headers}")
wheels=(
  nvidia-cuda-runtime-cu12==12.9.79
  nvidia-cublas-cu12==12.9.3.13
  nvidia-cuda-cccl-cu12==12.9.27
  nvidia-nccl-cu12==2.32.3
  nvidia-cuda-nvcc-cu12==12.9.86
)
packages=(cuda_runtime cublas cuda_cccl nccl cuda_nvcc)

say() { echo "cuda_headers: $*"; }
die() { echo "cuda_headers: $*" >&2; exit 1; }

stamp=$prefix/.dsx-cuda-headers-stamp
if [[ -f $stamp && "$(cat "$stamp")" == "${wheels[*]}" ]]; then
  say "$prefix is complete"
  exit 0
fi
source "$repo/tools/wheel_stage.sh"
require_pip
start_stage "$prefix"
unpack_wheels "${wheels[@]}"
mkdir -p "$stage/include"
for pkg in "${packages[@]}"; do
  [[ -d $stage/unpacked/nvidia/$pkg/include ]] ||
    die "the wheels hold no nvidia/$pkg/include: their layout changed"
  cp -a "$stage/unpacked/nvidia/$pkg/include/." "$stage/include/"
done
find "$stage/include" -name '__init__.py' -delete
for header in cuda_runtime.h cublasLt.h nccl.h crt/host_defines.h cuda_bf16.h; do
  [[ -f $stage/include/$header ]] || die "no $header among the wheels' headers"
done
rm -rf "$stage/unpacked" "$stage/wheels"
printf '%s\n' "${wheels[*]}" >"$stage/.dsx-cuda-headers-stamp"
rm -rf "$prefix"
mv "$stage" "$prefix"
trap - EXIT
say "headers in $prefix/include"
