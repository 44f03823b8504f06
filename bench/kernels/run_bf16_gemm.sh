#!/usr/bin/env bash
# The bf16 GEMM benchmark with its peer: builds bench_bf16_gemm, times torch's bf16 matmul in the
# peers venv (bench/peers/venv.sh) on the same shapes and threads, then prints one table
# (docs/benchmarks.md keeps the latest).
# usage: bash bench/kernels/run_bf16_gemm.sh [build-dir]   (env THREADS, TOKENS, REPS)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
threads=${THREADS:-1}
tokens=${TOKENS:-1024}
reps=${REPS:-5}
[[ -f $build/CMakeCache.txt ]] || cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target bench_bf16_gemm -j"$(nproc)" >/dev/null
python=$(bash "$root/bench/peers/venv.sh" | tail -n 1)
peers=$(mktemp --suffix=.json)
trap 'rm -f "$peers"' EXIT
"$python" "$root/bench/kernels/bf16_gemm_peers.py" --tokens "$tokens" --threads "$threads" --reps "$reps" --out "$peers"
OMP_NUM_THREADS=$threads OMP_PROC_BIND=close "$build/bench/kernels/bench_bf16_gemm" --tokens "$tokens" --reps "$reps" --peers "$peers"
