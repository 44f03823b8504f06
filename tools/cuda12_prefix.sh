#!/usr/bin/env bash
# Lays out a CUDA 12.9 toolkit in PREFIX (default .cache/cuda12 in the repository, ignored by git)
# for CI's compile-and-link check of the CUDA configuration against CUDA 12:
#   bash tools/cuda12_prefix.sh [PREFIX]
#   cmake -S . -B build-cuda12 -DDSX_CUDA=ON -DCMAKE_CUDA_COMPILER=PREFIX/bin/nvcc \
#         -DCUDAToolkit_ROOT=PREFIX
# Safe to run twice: a complete prefix (its stamp names the same wheels and compiler) is kept.
#
# From PyPI's CUDA 12.9 wheels (pip download, no virtual environment): the runtime (cudart, shared
# and static), cuBLAS/cuBLASLt, cuDNN 9, NCCL 2 and CCCL (thrust, cub, libcu++), their headers
# merged into include/, their libraries in lib64/ with the unversioned links the linker looks for.
#
# The compiler is not on PyPI for CUDA 12: nvidia-cuda-nvcc-cu12 holds only ptxas, libnvvm,
# libdevice and the crt headers, not nvcc, cudafe++, cicc, fatbinary or nvlink (CUDA 13's
# nvidia-cuda-nvcc is the first with the whole compiler), so this script does not fetch it. The
# compiler (those programs, its crt headers and libdevice) is copied from a CUDA toolkit on this
# machine, DSX_CUDA12_COMPILER_FROM (default /usr/local/cuda: CUDA 13 in CI), and bin/nvcc.profile
# points it at this prefix alone. 12.9's ptxas could not take part anyway: it refuses the PTX ISA
# 9.0 that CUDA 13's cicc writes.
# What a build with this prefix checks is therefore every source against CUDA 12.9's runtime,
# cuBLAS, cuDNN and NCCL headers (CUDART_VERSION 12090, so `#if CUDART_VERSION >= 13000` takes the
# CUDA 12 path) and every binary linked against their CUDA 12 libraries (libcudart.so.12,
# libcublasLt.so.12), not what nvcc 12.x itself accepts. Its binaries are for that check only:
# CUDA 13's compiler made their device code, so they are not CUDA 12 programs to run.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:-$repo/.cache/cuda12}
prefix=$(realpath -m "$prefix")
compiler_from=${DSX_CUDA12_COMPILER_FROM:-/usr/local/cuda}

# Pinned: CUDA 12.9 (runtime 12.9.79, cuBLAS 12.9, CCCL 12.9) with the cuDNN and NCCL built for
# CUDA 12 (their own version numbers).
wheels=(
  nvidia-cuda-runtime-cu12==12.9.79
  nvidia-cublas-cu12==12.9.3.13
  nvidia-cuda-cccl-cu12==12.9.27
  nvidia-cudnn-cu12==9.28.0.42
  nvidia-nccl-cu12==2.32.3
)
# The wheel's folder under nvidia/ for each of them, in the same order.
packages=(cuda_runtime cublas cuda_cccl cudnn nccl)

say() { echo "cuda12_prefix: $*"; }
die() { echo "cuda12_prefix: $*" >&2; exit 1; }

[[ -x $compiler_from/bin/nvcc ]] ||
  die "no nvcc at $compiler_from/bin/nvcc to take the compiler from (set DSX_CUDA12_COMPILER_FROM)"
# The toolkit the nvcc really runs from: some machines put `exec /usr/local/cuda-13.0/bin/nvcc`
# wrappers in /usr/local/bin, and a copied wrapper would run that toolkit with its own headers.
# nvcc's dry run names the folder of the real program.
nvcc_home=$("$compiler_from/bin/nvcc" --dryrun -c -x cu /dev/null -o /dev/null 2>&1 |
  sed -n 's/^#\$ _HERE_=//p' | head -1)
[[ -n $nvcc_home && -f $nvcc_home/nvcc.profile ]] ||
  die "$compiler_from/bin/nvcc --dryrun names no folder with nvcc.profile (got '${nvcc_home}')"
compiler_from=$(realpath "$nvcc_home/..")
compiler_version=$("$compiler_from/bin/nvcc" --version | tail -1)
stamp_text="wheels: ${wheels[*]}
compiler: $compiler_version ($(realpath "$compiler_from"))"
stamp=$prefix/.dsx-cuda12-stamp
if [[ -f $stamp && "$(cat "$stamp")" == "$stamp_text" ]]; then
  say "$prefix is complete (CUDA 12.9 wheels; compiler $compiler_version)"
  exit 0
fi

source "$repo/tools/wheel_stage.sh"
require_pip
start=$SECONDS
start_stage "$prefix"

unpack_wheels "${wheels[@]}"
unpacked=$stage/unpacked/nvidia
for pkg in "${packages[@]}"; do
  [[ -d $unpacked/$pkg/include ]] ||
    die "the wheels hold no nvidia/$pkg/include: their layout changed"
done

# Headers of every wheel in one include/ (no two wheels ship the same file).
mkdir -p "$stage/include" "$stage/lib64"
for pkg in "${packages[@]}"; do
  cp -a "$unpacked/$pkg/include/." "$stage/include/"
  if [[ -d $unpacked/$pkg/lib ]]; then
    find "$unpacked/$pkg/lib" -mindepth 1 -maxdepth 1 ! -name '__init__.py' \
      -exec mv -t "$stage/lib64/" {} +
  fi
done
find "$stage/include" "$stage/lib64" -name '__init__.py' -delete
# libcudart.so -> libcudart.so.12 and the like: the names -lcudart and find_library look for.
for lib in "$stage"/lib64/*.so.*; do
  link=${lib%%.so.*}.so
  [[ -e $link ]] || ln -s "$(basename "$lib")" "$link"
done
ln -s lib64 "$stage/lib"
rm -rf "$stage/unpacked" "$stage/wheels"

# The compiler (see the top): programs, device-link stubs, cicc, libdevice and the crt headers,
# which belong to the compiler (cudafe++ writes code for its own crt/host_runtime.h).
compiler_include=$compiler_from/include
[[ -f $compiler_include/crt/host_runtime.h ]] ||
  compiler_include=$compiler_from/targets/x86_64-linux/include
[[ -f $compiler_include/crt/host_runtime.h ]] || die "no crt/host_runtime.h under $compiler_from"
mkdir -p "$stage/bin" "$stage/nvvm/bin"
for tool in nvcc cudafe++ fatbinary nvlink ptxas bin2c; do
  if [[ -x $compiler_from/bin/$tool ]]; then
    [[ $(head -c 4 "$compiler_from/bin/$tool") == $'\x7fELF' ]] ||
      die "$compiler_from/bin/$tool is not a program but a script; name the real toolkit in DSX_CUDA12_COMPILER_FROM"
    cp -L "$compiler_from/bin/$tool" "$stage/bin/"
  elif [[ $tool != bin2c ]]; then
    die "$compiler_from/bin/$tool is missing"
  fi
done
[[ -d $compiler_from/bin/crt ]] && cp -rL "$compiler_from/bin/crt" "$stage/bin/"
cp -L "$compiler_from/nvvm/bin/cicc" "$stage/nvvm/bin/"
cp -rL "$compiler_from/nvvm/libdevice" "$stage/nvvm/"
cp -rL "$compiler_include/crt" "$stage/include/"
cp -L "$compiler_include/fatbinary_section.h" "$stage/include/"
cat >"$stage/bin/nvcc.profile" <<'EOF'
# Written by tools/cuda12_prefix.sh: this prefix's headers and libraries only.
TOP              = $(_HERE_)/..

CICC_PATH        = $(TOP)/nvvm/bin
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice

LD_LIBRARY_PATH += $(TOP)/lib64:
PATH            += $(CICC_PATH):$(_HERE_):

INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)

LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64"

CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
EOF

# The prefix works: a kernel and every library's header, compiled and linked against it.
probe=$stage/probe
mkdir -p "$probe"
cat >"$probe/probe.cu" <<'EOF'
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>
#include <thrust/version.h>
#include <cstdio>
static_assert(CUDART_VERSION / 1000 == 12, "the prefix's runtime headers are not CUDA 12's");
__global__ void scale(float* x, __nv_bfloat16 s) { x[threadIdx.x] *= __bfloat162float(s); }
int main() {
  int nccl = 0;
  ncclGetVersion(&nccl);
  std::printf("cudart %d cublas %d cudnn %zu nccl %d thrust %d\n", CUDART_VERSION,
              CUBLAS_VERSION, cudnnGetVersion(), nccl, THRUST_VERSION);
  scale<<<1, 1>>>(nullptr, __float2bfloat16(2.0f));
  cublasLtHandle_t lt = nullptr;
  return cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS ? 0 : 1;
}
EOF
"$stage/bin/nvcc" -arch=sm_80 -o "$probe/probe" "$probe/probe.cu" \
  -lcublasLt -lcublas -lcudnn -lnccl ||
  die "the prefix in $stage does not compile and link a probe (see above)"
readelf -d "$probe/probe" | grep -q 'NEEDED.*libcublasLt\.so\.12' ||
  die "the probe did not link CUDA 12's cuBLASLt"
rm -rf "$probe"

printf '%s\n' "$stamp_text" >"$stage/.dsx-cuda12-stamp"
rm -rf "$prefix"
mv "$stage" "$prefix"
trap - EXIT
say "$prefix: CUDA 12.9 headers and libraries, compiler $compiler_version," \
  "$(du -sh "$prefix" | cut -f1), $((SECONDS - start)) s"
