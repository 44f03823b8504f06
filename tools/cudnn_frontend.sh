#!/usr/bin/env bash
# Fetches NVIDIA's cudnn-frontend headers (the header-only C++ graph API over cuDNN's backend that
# kernels/cuda/cudnn_attention.cpp builds its fused-attention graphs with) into DEST (default
# .cache/cudnn-frontend in the repository, ignored by git):
#   bash tools/cudnn_frontend.sh [DEST]      -> DEST/include/cudnn_frontend.h
# Only the CUDA configuration needs them: CMake runs this script when CUDA is on
# (cmake/DsxCuda.cmake), and tests/gpu/prepare.sh runs it into gpu-deps/ for GPU machines without
# a network. Safe to run twice: a DEST whose stamp names the pinned wheel and hash is kept, and
# nothing is downloaded.
#
# From PyPI: the nvidia-cudnn-frontend wheel (pip download, no virtual environment, no install),
# one pinned file whose sha256 is checked; only its include/ is kept (the headers are the same in
# every platform's wheel, the rest is the Python module). Version 1.18.0 compiles against cuDNN
# 9.19 (CUDA 13) and 9.28 (tools/cuda12_prefix.sh's CUDA 12 wheels). Not newer: from 1.19 on the
# headers include <nvrtc.h> and call NVRTC (for an sm100 engine), which CUDA 12.9's prefix lacks.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
dest=$(realpath -m "${1:-$repo/.cache/cudnn-frontend}")

version=1.18.0
wheel=nvidia_cudnn_frontend-$version-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
sha256=382ea063b92cbfd5b442cb75ff8422932d78276aecf139e46713ed1ad3d07af4

say() { echo "cudnn_frontend: $*"; }
die() { echo "cudnn_frontend: $*" >&2; exit 1; }

stamp_text="$wheel sha256:$sha256"
stamp=$dest/.dsx-cudnn-frontend-stamp
if [[ -f $stamp && "$(cat "$stamp")" == "$stamp_text" && -f $dest/include/cudnn_frontend.h ]]; then
  say "$dest holds cudnn-frontend $version"
  exit 0
fi

source "$repo/tools/wheel_stage.sh"
require_pip
start_stage "$dest"

# The platform and Python named explicitly, so every machine gets the same file as the hash.
say "downloading nvidia-cudnn-frontend==$version from PyPI"
python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --platform manylinux_2_28_x86_64 --python-version 3.11 --implementation cp --abi cp311 \
  --dest "$stage/wheels" "nvidia-cudnn-frontend==$version" ||
  die "pip could not download nvidia-cudnn-frontend==$version (is PyPI reachable? On a machine
  without a network, run this where there is one and carry DEST, or pass -DDSX_CUDNN_FRONTEND_DIR)"
[[ -f $stage/wheels/$wheel ]] || die "pip downloaded $(ls "$stage/wheels"), not $wheel"
got=$(sha256sum "$stage/wheels/$wheel" | cut -d' ' -f1)
[[ $got == "$sha256" ]] || die "$wheel has sha256 $got, not the pinned $sha256"
python3 -m zipfile -e "$stage/wheels/$wheel" "$stage/unpacked"
[[ -f $stage/unpacked/include/cudnn_frontend.h ]] ||
  die "the wheel holds no include/cudnn_frontend.h: its layout changed"
header_version=$(
  sed -n 's/^#define CUDNN_FRONTEND_\(MAJOR\|MINOR\|PATCH\)_VERSION \([0-9]*\)$/\2/p' \
    "$stage/unpacked/include/cudnn_frontend_version.h" | paste -sd.
)
[[ $header_version == "$version" ]] ||
  die "the wheel's headers are version '$header_version', not $version"

mkdir -p "$stage/out"
mv "$stage/unpacked/include" "$stage/out/include"
cp "$stage/unpacked"/*.dist-info/licenses/* "$stage/out/" 2>/dev/null ||
  cp "$stage/unpacked"/*.dist-info/LICENSE* "$stage/out/" 2>/dev/null || true
printf '%s\n' "$stamp_text" >"$stage/out/.dsx-cudnn-frontend-stamp"
rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
mv "$stage/out" "$dest"
say "$dest: cudnn-frontend $version headers ($(du -sh "$dest" | cut -f1))"
