#!/usr/bin/env bash
# The CPU optimizer benchmark with its peers: builds bench_cpu_adam and dsx's AdamW shim, times
# dsx, DeepSpeedCPUAdam and torch.optim.AdamW (foreach, fused) round-robin in one process of the
# peers venv (bench/peers/venv.sh) on the same sizes and threads, then prints one table with
# dsx beside copy bandwidth and the peers (docs/benchmarks.md keeps the latest).
# usage: bash bench/kernels/run_cpu_adam.sh [build-dir]   (env THREADS, SIZES, REPS)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
threads=${THREADS:-$(nproc)}
sizes=${SIZES:-16777216,67108864}
reps=${REPS:-25}
[[ -f $build/CMakeCache.txt ]] || cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target bench_cpu_adam dsx_bench_adam_shim -j"$threads" >/dev/null
python=$(bash "$root/bench/peers/venv.sh" | tail -n 1)
peers=$(mktemp --suffix=.json)
trap 'rm -f "$peers"' EXIT
"$python" "$root/bench/kernels/cpu_adam_peers.py" --dsx-lib "$build/bench/kernels/libdsx_bench_adam_shim.so" --sizes "$sizes" --threads "$threads" --reps "$reps" --out "$peers"
OMP_NUM_THREADS=$threads OMP_PROC_BIND=close "$build/bench/kernels/bench_cpu_adam" --sizes "$sizes" --reps "$reps" --peers "$peers"
