#!/usr/bin/env bash
# Packs a CUDA build's GPU tests (tests/gpu/test_gpu_*), GPU benchmarks (bench/*/bench_gpu_*) and
# dsx into one .tar.xz (or .tar.gz) that a GPU machine runs with `tests/gpu/run.sh --bundle FILE`, with no
# compiler, CMake or Debian libraries there (docs/gpu.md, "A bundle built here, run there").
#
#   bash tools/gpu_bundle.sh BUILD_DIR OUT_FILE
#
# The binaries are stripped; the shared libraries they load are copied beside them (lib/, found
# with ldd), except the C library's own and NVIDIA's (libcuda, libcudart, cuBLAS/Lt, NCCL, cuDNN,
# ...), which the GPU image provides: they are too big to carry (NCCL alone is 200+ MB); only
# cuDNN's small loader is carried, as a stand-in for an image without cuDNN. Each file
# finds lib/ through its RUNPATH ($ORIGIN, set with patchelf). MANIFEST lists every file, its size
# and the NVIDIA libraries each binary needs. An emulated build (-DDSX_CUDA=EMULATED) makes a
# bundle of kind "emulated", whose stand-in CUDA library is its own and so is carried.
# env: DSX_BUNDLE_LIMIT_MIB (default 60): a bigger bundle is an error.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
die() {
  echo "tools/gpu_bundle.sh: $*" >&2
  exit 1
}
[[ $# == 2 ]] || die "usage: tools/gpu_bundle.sh BUILD_DIR OUT_FILE (a CUDA or emulated build; OUT_FILE ends in .tar.xz or .tar.gz)"
build=$(realpath -m "$1")
out=$(realpath -m "$2")
limit_mib=${DSX_BUNDLE_LIMIT_MIB:-60}
# xz's large window finds the static code every test binary repeats (61 MiB as gzip, 24 as xz,
# for CUDA 12's bundle): the one a lent machine carries is .tar.xz; .tar.gz packs faster.
case $out in
  *.tar.xz) compress=(-J) ;;
  *.tar.gz) compress=(-z) ;;
  *) die "OUT_FILE $out must end in .tar.xz or .tar.gz" ;;
esac
[[ -f $build/CMakeCache.txt ]] || die "$build is not a CMake build folder (no CMakeCache.txt)"
command -v patchelf >/dev/null || die "patchelf is missing: bash tools/setup.sh installs it"
case $(sed -n 's/^DSX_CUDA:[A-Z]*=//p' "$build/CMakeCache.txt") in
  EMULATED) kind=emulated ;;
  ON) kind=cuda ;;
  *) die "$build is not a CUDA build (DSX_CUDA is neither ON nor EMULATED)" ;;
esac

# The libraries a GPU image provides: NVIDIA's driver and CUDA libraries.
is_nvidia() { [[ $1 =~ ^lib(cuda|cudart|cublas|cublasLt|nccl|cudnn[a-z_]*|nvrtc[a-z-]*|nvJitLink|nvidia-[a-z-]+)\.so ]]; }
# The C library's own, which every Linux has and which must match its loader.
is_libc() { [[ $1 =~ ^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libutil|libresolv|libanl|libnsl)[.-] ]]; }

cd "$build"
binaries=()
for f in tests/gpu/test_gpu_* bench/*/bench_gpu_* dsx; do
  [[ -f $f && -x $f ]] && binaries+=("$f")
done
((${#binaries[@]} > 0)) || die "no test_gpu_*, bench_gpu_* or dsx in $build: build them first (target dsx_cuda_check)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stage=$work/dsx-gpu-bundle
mkdir -p "$stage/lib/cxx"
manifest=$stage/MANIFEST
{
  echo "dsx-gpu-bundle 1"
  echo "kind $kind"
  echo "commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
} >"$manifest"

# copy_deps <file>: copies what <file> loads into lib/; prints the NVIDIA libraries it needs.
copy_deps() {
  local name arrow path rest nvidia=()
  while read -r name arrow path rest; do
    [[ $arrow == "=>" ]] || continue  # the loader and the vdso
    if is_nvidia "$name"; then
      nvidia+=("$name")
      # cuDNN 9's libcudnn.so.9 is a small loader that opens its engines only when asked: carried
      # (lib/cudnn-shim) for images without cuDNN, where it lets the binaries start and cuDNN's
      # attention say it is unsupported, instead of every binary failing to load.
      if [[ $name == libcudnn.so.* && -f $path && $(stat -L -c %s "$path") -lt 1048576 && ! -f $stage/lib/cudnn-shim/$name ]]; then
        mkdir -p "$stage/lib/cudnn-shim"
        cp -L "$path" "$stage/lib/cudnn-shim/$name"
      fi
    elif is_libc "$name"; then
      :
    elif [[ $path == not ]]; then
      die "$1 needs $name, which is not found on this machine: install it (bash tools/setup.sh) and build again"
    else
      # The C++ runtime goes aside (lib/cxx): run.sh takes the image's when it is new enough,
      # since this machine's may need a newer glibc than the image has.
      dest=$stage/lib
      [[ $name =~ ^lib(stdc\+\+|gcc_s)\. ]] && dest=$stage/lib/cxx
      [[ -f $dest/$name ]] || { cp -L "$path" "$dest/$name" && chmod u+w "$dest/$name"; }
    fi
  done < <(timeout 60 ldd "$1")
  echo "${nvidia[*]}"
}

declare -A needs
for f in "${binaries[@]}"; do
  mkdir -p "$stage/$(dirname "$f")"
  strip -o "$stage/$f" "$f"
  needs[$f]=$(copy_deps "$f")
  # $ORIGIN: lib/ relative to the binary, wherever the bundle is unpacked.
  up=$(dirname "$f" | sed -E 's#[^/]+#..#g')
  [[ $f == */* ]] || up=.
  patchelf --set-rpath "\$ORIGIN/$up/lib" "$stage/$f"
done
shopt -s nullglob
for lib in "$stage"/lib/*.so* "$stage"/lib/cxx/* "$stage"/lib/cudnn-shim/*; do
  strip --strip-unneeded "$lib"
  patchelf --set-rpath "\$ORIGIN" "$lib"
done

# The probe that run.sh asks for the runtime's version and the device count (cudart static).
if [[ $kind == cuda ]]; then
  nvcc=$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' CMakeCache.txt)
  timeout 300 "$nvcc" -o "$stage/cuda_probe" "$root/tests/gpu/cuda_probe.cu" || die "cannot build the CUDA probe with $nvcc"
  strip "$stage/cuda_probe"
  binaries+=(cuda_probe)
  needs[cuda_probe]=$(copy_deps "$stage/cuda_probe")
fi
cp "$root/tests/gpu/run.sh" "$root/tests/gpu/bundle_run.sh" "$stage/"

# The newest glibc and libstdc++ symbol versions the files ask for: run.sh compares them with
# the GPU machine's and refuses an older glibc, or takes lib/cxx for an older libstdc++.
newest() { # newest <prefix> <file>...: the newest <prefix>_x.y[.z] version the files need
  local prefix=$1
  shift
  readelf -V "$@" 2>/dev/null | grep -oE "${prefix}_[0-9]+\.[0-9]+(\.[0-9]+)?" | sed "s/${prefix}_//" |
    sort -uV | tail -n 1 || true
}
mapfile -t elves < <(find "$stage" -type f ! -name '*.sh' ! -name MANIFEST ! -path '*/lib/cxx/*')
{
  echo "needs-glibc $(newest GLIBC "${elves[@]}")"
  echo "needs-glibcxx $(newest GLIBCXX "${elves[@]}")"
  echo "cxx-needs-glibc $(newest GLIBC "$stage"/lib/cxx/*)"
} >>"$manifest"
# file <path> <bytes> <NVIDIA libraries it needs, or ->
while read -r path; do
  rel=${path#"$stage"/}
  [[ $rel == MANIFEST ]] && continue
  n=${needs[$rel]:-}
  echo "file $rel $(stat -c %s "$path") ${n// /,}" | sed 's/ $/ -/' >>"$manifest"
done < <(find "$stage" -type f | sort)

mkdir -p "$(dirname "$out")"
XZ_OPT=-9 timeout 600 tar -C "$work" "${compress[@]}" -cf "$out.tmp" dsx-gpu-bundle
mv "$out.tmp" "$out"
size=$(stat -c %s "$out")
awk '/^file / {n++; s += $3} END {printf "tools/gpu_bundle.sh: %d files, %.1f MiB unpacked\n", n, s / 1048576}' "$manifest"
echo "tools/gpu_bundle.sh: $out: $(awk -v s="$size" 'BEGIN {printf "%.1f", s / 1048576}') MiB ($kind; limit $limit_mib MiB)"
if ((size > limit_mib * 1048576)); then
  rm -f "$out"
  die "the bundle is over $limit_mib MiB: strip more, or leave a binary out (removed $out)"
fi
