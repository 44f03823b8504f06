#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU: builds dsx's GPU tests and benchmarks with CUDA,
# runs every GPU test binary (tests/gpu/test_gpu_*) and every GPU benchmark (bench/*/bench_gpu_*),
# and prints a short table. Exit status 0 when every GPU test passed (a skipped test counts as a
# failure here: on a GPU machine a skip means CUDA saw no device).
#
#   bash tests/gpu/run.sh [build-dir]          configure + build (default build-gpu), then run
#   bash tests/gpu/run.sh --no-build build-dir run binaries built elsewhere (e.g. on a CPU-only
#                                              machine with nvcc, then copied here)
# Building needs the packages of tools/setup.sh and nvcc (PATH or /usr/local/cuda/bin).
# env: JOBS (build jobs), CUDA_ARCH (e.g. 90; default: the project's 80;90).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build_it=1
if [[ ${1:-} == --no-build ]]; then
  build_it=0
  shift
fi
build=$(realpath -m "${1:-$root/build-gpu}")
jobs=${JOBS:-$(nproc)}
[[ -d /usr/local/cuda/bin ]] && export PATH=/usr/local/cuda/bin:$PATH
mkdir -p "$build"
log=$build/gpu-run.log
summary=$build/gpu-summary.md
bench_out=$build/gpu-bench.md
: >"$log"
: >"$summary"
: >"$bench_out"

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >>"$log" 2>&1; then
  echo "tests/gpu/run.sh: no NVIDIA GPU visible (nvidia-smi -L failed); run it on a GPU machine." >&2
  exit 2
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)

# row <step> <result> <detail>: one line of the summary table.
row() { printf '| %s | %s | %s |\n' "$1" "$2" "$3" >>"$summary"; }

if [[ $build_it == 1 ]]; then
  arch=()
  [[ -n ${CUDA_ARCH:-} ]] && arch=(-DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH")
  t0=$SECONDS
  if ! cmake -S "$root" -B "$build" -DDSX_CUDA=ON -DCMAKE_BUILD_TYPE=Release "${arch[@]}" >>"$log" 2>&1; then
    tail -n 30 "$log"
    echo "tests/gpu/run.sh: configure failed (missing packages? run: bash tools/setup.sh)" >&2
    exit 1
  fi
  # Only the GPU tests and benchmarks (and the libraries they link), not the whole project.
  targets=$(cmake --build "$build" --target help | awk '/ (test_gpu_|bench_gpu_)/ {print $2}')
  # shellcheck disable=SC2086
  if ! cmake --build "$build" -j"$jobs" --target $targets >>"$log" 2>&1; then
    grep -E 'error' "$log" | head -n 30
    echo "tests/gpu/run.sh: build failed; full log: $log" >&2
    exit 1
  fi
  row "build ($(echo $targets | wc -w) targets)" ok "$((SECONDS - t0)) s"
fi

failed=0
shopt -s nullglob
for test in "$build"/tests/gpu/test_gpu_*; do
  [[ -f $test && -x $test ]] || continue
  t0=$SECONDS
  out=$("$test" --gtest_color=no 2>&1)
  status=$?
  echo "$out" >>"$log"
  passed=$(grep -oE '\[  PASSED  \] [0-9]+' <<<"$out" | grep -oE '[0-9]+$')
  skipped=$(grep -oE '\[  SKIPPED \] [0-9]+' <<<"$out" | grep -oE '[0-9]+$')
  failures=$(grep -E '^\[  FAILED  \] [A-Za-z]' <<<"$out" | sed 's/\[  FAILED  \] //' | tr '\n' ' ')
  if [[ $status == 0 && ${skipped:-0} != 0 ]]; then
    # On a GPU machine nothing may skip: a skip means CUDA saw no device.
    failed=1
    row "$(basename "$test")" SKIPPED "${passed:-0} passed, ${skipped} skipped: CUDA sees no device?"
  elif [[ $status == 0 ]]; then
    row "$(basename "$test")" ok "${passed:-0} passed, $((SECONDS - t0)) s"
  else
    failed=1
    row "$(basename "$test")" FAILED "${failures:-exit status $status}"
  fi
done

for bench in "$build"/bench/*/bench_gpu_*; do
  [[ -f $bench && -x $bench ]] || continue
  t0=$SECONDS
  if "$bench" >>"$bench_out" 2>>"$log"; then
    row "$(basename "$bench")" ok "$((SECONDS - t0)) s"
  else
    row "$(basename "$bench")" FAILED "see $log"
  fi
  echo >>"$bench_out"
done

echo "## dsx GPU run on $gpu"
echo
echo "| step | result | detail |"
echo "|---|---|---|"
cat "$summary"
echo
cat "$bench_out"
echo "(full log: $log)"
exit $failed
