#!/usr/bin/env bash
# Run HERE (a machine with Debian's mirrors), before carrying the tree to a GPU machine whose
# image has CUDA, a compiler, CMake and Python but none of the libraries of tools/setup.sh and no
# package registry. Downloads those libraries' Debian packages, with the libraries they load that
# such an image lacks, into gpu-deps/ (ignored by git); tests/gpu/run.sh unpacks them there into
# a private prefix (tests/gpu/gpu_deps.sh). docs/gpu.md, "Running the GPU tests", says what to carry.
#
#   bash tests/gpu/prepare.sh [folder]             download and verify (default: gpu-deps)
#   bash tests/gpu/prepare.sh --check [folder]     also build GPU test targets against the
#                                                  folder with this machine's copies hidden
#
# Verifying: every shared library in the packages finds each library it needs inside them or in
# the C/C++ runtime that every image has; the glibc and libstdc++ versions they need are written
# to the folder's MANIFEST, which run.sh compares with the GPU machine's.
# env for --check: CHECK_DIR (default /tmp/dsx-gpu-deps-check), CHECK_TARGETS, JOBS (default 1).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/gpu/gpu_deps.sh disable=SC1091
source "$root/tests/gpu/gpu_deps.sh"
check=0
if [[ ${1:-} == --check ]]; then
  check=1
  shift
fi
folder=$(realpath -m "${1:-$root/gpu-deps}")
say() { echo "tests/gpu/prepare.sh: $*"; }
die() {
  echo "tests/gpu/prepare.sh: $*" >&2
  exit 1
}

# Debian 12 (bookworm) names. The build needs the -dev packages, the programs load the rest.
packages=(
  rapidjson-dev                                    # ds_config and safetensors headers
  libboost1.74-dev libboost-program-options1.74-dev libboost-program-options1.74.0
  libfabric-dev libfabric1                         # the ofi backend ...
  libibverbs1 ibverbs-providers librdmacm1 libnl-3-200 libnl-route-3-200  # ... and what libfabric loads
  libpsm2-2 libpsm-infinipath1 libnuma1 libatomic1 libuuid1
  libssl-dev libssl3                               # the store's HMAC (OpenSSL)
  libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libopenblas0 libgfortran5 libquadmath0
  libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3  # tokenizers: regexes
  libutf8proc-dev libutf8proc2                     # tokenizers: NFC
  libsentencepiece-dev libsentencepiece0 libprotobuf-lite32  # tokenizers: tokenizer.model
  libaio-dev libaio1                               # NVMe offload: direct asynchronous I/O
  libgtest-dev                                     # GPU tests
  libbenchmark-dev libbenchmark1debian             # GPU benchmarks
)
# What every image with a C++ compiler has; nothing here may need anything else from outside.
runtime='^(libc\.so\.6|libm\.so\.6|ld-linux-x86-64\.so\.2|libgcc_s\.so\.1|libstdc\+\+\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1)$'

# --- download -----------------------------------------------------------------------------------
[[ $(dpkg --print-architecture) == amd64 ]] || die "the GPU machine is x86-64: run this on an amd64 Debian machine"
mkdir -p "$folder"
rm -f "$folder"/*.deb
# apt's _apt user cannot write into root's folders; download into a scratch folder it can.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
chmod 777 "$scratch"
if ! (cd "$scratch" && apt-get download -q "${packages[@]}" >"$scratch/apt.log" 2>&1); then
  cat "$scratch/apt.log" >&2
  die "apt-get download failed (run 'apt-get update' first; package names are Debian 12's)"
fi
mv "$scratch"/*.deb "$folder/"
say "downloaded ${#packages[@]} packages into $folder ($(du -sh "$folder" | cut -f1))"
# cudnn-frontend's headers (PyPI, not Debian) for the CUDA build's fused attention: CMake takes
# them from gpu-deps/cudnn-frontend (or $DSX_GPU_DEPS/cudnn-frontend) without a network.
bash "$root/tools/cudnn_frontend.sh" "$folder/cudnn-frontend" || die "cannot fetch cudnn-frontend's headers"

# --- verify -------------------------------------------------------------------------------------
prefix=$scratch/prefix
(gpu_deps_use "$folder" "$prefix")
mapfile -t lib_dirs < <(gpu_deps_lib_dirs "$prefix")
missing=()
while IFS= read -r so; do
  while IFS= read -r needed; do
    [[ $needed =~ $runtime ]] && continue
    found=0
    for dir in "${lib_dirs[@]}"; do [[ -e $dir/$needed ]] && found=1 && break; done
    ((found)) || missing+=("${so#"$prefix"/} needs $needed")
  done < <(readelf -d "$so" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
done < <(find "$prefix" -name 'lib*.so*' -type f)
if ((${#missing[@]})); then
  printf '  %s\n' "${missing[@]}" >&2
  die "the packages need libraries that are neither among them nor in the C/C++ runtime: add their packages"
fi
# The newest glibc and libstdc++ symbol versions any of them asks for.
newest() {
  find "$prefix" -name 'lib*.so*' -type f -exec objdump -T {} + 2>/dev/null | grep -oE "\\($1_[0-9.]+\\)" |
    tr -d '()' | sort -uV | tail -n 1 | sed "s/^$1_//"
}
glibc=$(newest GLIBC)
glibcxx=$(newest GLIBCXX)
{
  echo "# tests/gpu/prepare.sh, $(date -u +%Y-%m-%d), Debian $(cat /etc/debian_version)"
  echo "needs-glibc $glibc"
  echo "needs-glibcxx $glibcxx"
  for deb in "$folder"/*.deb; do dpkg-deb -f "$deb" Package Version | sed 's/^[A-Za-z]*: //' | paste -sd' '; done
} >"$folder/MANIFEST"
say "verified: every library's needs are met inside the folder or by glibc >= $glibc and libstdc++ >= $glibcxx"
say "carry it: run(carry=[\"${folder#"$root"/}\"], ...); size $(du -sh "$folder" | cut -f1) of the 64 MiB a call may carry"

((check)) || exit 0

# --- check: configure and build GPU test targets against the folder alone -------------------------
# In a private mount namespace, an overlay on /usr whites out every file these packages have on
# this machine (and the alternatives links into them), so the compiler, CMake and the loader can
# only find the prefix's copies.
[[ $(id -u) == 0 ]] || die "--check needs root (a mount namespace and an overlay on /usr)"
check_dir=${CHECK_DIR:-/tmp/dsx-gpu-deps-check}
targets=${CHECK_TARGETS:-test_gpu_comm}
rm -rf "$check_dir"
mkdir -p "$check_dir/upper/usr" "$check_dir/work"
gpu_deps_use "$folder" "$check_dir/prefix"
hidden=0
hide() { # hide </usr/...>: a whiteout in the overlay's upper layer
  local rel=${1#/usr/}
  [[ -e $check_dir/upper/usr/$rel ]] && return
  mkdir -p "$check_dir/upper/usr/$(dirname "$rel")"
  mknod "$check_dir/upper/usr/$rel" c 0 0
  hidden=$((hidden + 1))
}
while IFS= read -r rel; do
  sys=/${rel#./}
  [[ $sys == /lib/* ]] && sys=/usr$sys # merged /usr
  [[ $sys == /usr/* && (-f $sys || -L $sys) ]] && hide "$sys"
done < <(cd "$check_dir/prefix" && find . \( -type f -o -type l \) ! -name .unpacked)
while IFS= read -r link; do # alternatives: /usr/lib/x86_64-linux-gnu/libopenblas.so.0 -> /etc/alternatives/...
  target=$(readlink -f "$link")
  [[ -e $check_dir/upper$target ]] && hide "$link"
done < <(find /usr/lib/x86_64-linux-gnu -maxdepth 1 -type l)
say "check: $hidden of this machine's files hidden; building $targets in $check_dir/build"

# Runs inside the namespace; its settings come in the environment.
check_inside() {
  mount -t overlay overlay -o "lowerdir=/usr,upperdir=$CHECK_DIR/upper/usr,workdir=$CHECK_DIR/work" /usr
  local p=$CHECK_DIR/prefix b=$CHECK_DIR/build gone t bin
  for gone in /usr/include/boost/program_options.hpp /usr/include/rapidjson/document.h /usr/include/rdma/fabric.h \
    /usr/include/openssl/ssl.h /usr/include/gtest/gtest.h /usr/lib/x86_64-linux-gnu/libfabric.so.1 \
    /usr/lib/x86_64-linux-gnu/libopenblas.so.0; do
    [[ ! -e $gone ]] || { echo "check: $gone is still visible" >&2 && return 1; }
  done
  cmake -S "$ROOT" -B "$b" -DDSX_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    >"$CHECK_DIR/configure.log" 2>&1 || { tail -n 30 "$CHECK_DIR/configure.log" && return 1; }
  echo "-- found (CMakeCache.txt; <prefix> = $p):"
  grep -E '^(Boost_DIR|boost_program_options_DIR|RAPIDJSON_INCLUDE_DIR|LIBFABRIC_(INCLUDE_DIR|LIBRARY)|BLAS_openblas_LIBRARY|CBLAS_INCLUDE_DIR|OPENSSL_(INCLUDE_DIR|CRYPTO_LIBRARY)|GTest_DIR|benchmark_DIR):' \
    "$b/CMakeCache.txt" | sed "s|$p|<prefix>|"
  # shellcheck disable=SC2086 # a list of targets
  cmake --build "$b" -j"$JOBS" --target $CHECK_TARGETS >"$CHECK_DIR/build.log" 2>&1 ||
    { grep -E 'error' "$CHECK_DIR/build.log" | head -n 20 && return 1; }
  # Objects that include Boost.Program_options and RapidJSON, without building all of dsx.
  make -C "$b/tools" cmd_train.cpp.o >>"$CHECK_DIR/build.log" 2>&1
  make -C "$b/models" io/safetensors.cpp.o >>"$CHECK_DIR/build.log" 2>&1
  echo "-- compiled cmd_train.cpp (Boost) and io/safetensors.cpp (RapidJSON) with $(grep -o -- "-isystem $p/usr/include" "$b/compile_commands.json" | sort -u | sed "s|$p|<prefix>|")"
  for t in $CHECK_TARGETS; do
    bin=$(find "$b/tests" "$b/bench" -name "$t" -type f -perm -u+x | head -n 1)
    echo "-- ldd $t: the libraries it takes from the prefix (and any not found):"
    ldd "$bin" | grep -E "=> $p|not found" | sed "s|$p|<prefix>|"
    if ldd "$bin" | grep -q "not found"; then return 1; fi
    "$bin" --gtest_list_tests >/dev/null # it loads and starts
  done
}
export -f check_inside
cuda_bin=$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")
export ROOT=$root CHECK_DIR=$check_dir CHECK_TARGETS=$targets JOBS=${JOBS:-1} PATH=$cuda_bin:$PATH
unshare -m bash -euo pipefail -c check_inside
say "check passed: configured and built against $folder alone (logs in $check_dir)"
