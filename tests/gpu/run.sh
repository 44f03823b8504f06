#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU: builds dsx with CUDA, runs every GPU test
# (every test of tests/gpu/, labelled "gpu") and every GPU benchmark (the bench_gpu_* programs),
# and prints a short table of the results. Exit status: 0 when every GPU test passed.
#   bash tests/gpu/run.sh [build-dir]    (default: build-gpu; env JOBS, CUDA_ARCH)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}
jobs=${JOBS:-$(nproc)}
[[ -d /usr/local/cuda/bin ]] && export PATH=/usr/local/cuda/bin:$PATH
log=$build/gpu-run.log
mkdir -p "$build"
: >"$log"

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >>"$log" 2>&1; then
  echo "tests/gpu/run.sh: no NVIDIA GPU visible (nvidia-smi -L failed); run it on a GPU machine." >&2
  exit 2
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)

step() {  # step <title> <command...>: runs, logs, prints a one-line status
  local title=$1; shift
  local t0=$SECONDS
  if "$@" >>"$log" 2>&1; then status=ok; else status=FAILED; fi
  printf '| %s | %s | %ss |\n' "$title" "$status" $((SECONDS - t0)) >>"$build/gpu-summary.md"
  [[ $status == ok ]]
}

: >"$build/gpu-summary.md"
arch=()
[[ -n ${CUDA_ARCH:-} ]] && arch=(-DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH")
step "configure (CUDA on)" cmake -S "$root" -B "$build" -DDSX_CUDA=ON -DCMAKE_BUILD_TYPE=Release "${arch[@]}" ||
  { cat "$log"; exit 1; }
# Build the GPU tests and benchmarks first (they need only their own libraries), then the rest.
targets=$(cmake --build "$build" --target help | awk '/(test_gpu_|bench_gpu_)/ {print $2}' | tr '\n' ' ')
# shellcheck disable=SC2086
step "build GPU tests and benchmarks" cmake --build "$build" -j"$jobs" --target $targets || { tail -n 60 "$log"; exit 1; }

tests_ok=0
step "GPU tests (ctest -L gpu)" ctest --test-dir "$build" -L gpu --output-on-failure --timeout 900 && tests_ok=1
ctest_line=$(grep -E 'tests passed|tests failed' "$log" | tail -n 1)

bench_out=$build/gpu-bench.md
: >"$bench_out"
for bench in "$build"/bench/*/bench_gpu_*; do
  [[ -x $bench ]] || continue
  step "benchmark $(basename "$bench")" bash -c "'$bench' | tee -a '$bench_out'"
done

echo
echo "## dsx GPU run on $gpu"
echo
echo "| step | result | time |"
echo "|---|---|---|"
cat "$build/gpu-summary.md"
echo
echo "ctest: ${ctest_line:-no result}"
echo
cat "$bench_out"
echo
echo "(full log: $log)"
if [[ $tests_ok != 1 ]]; then
  echo
  echo "Failed GPU tests:"
  grep -E '^\s*[0-9]+ - gpu\..*(Failed|Timeout|Exception)' "$log" || grep -E 'FAILED|Failure' "$log" | head -n 40
  exit 1
fi
