#!/usr/bin/env bash
# The NF4 linear benchmark with its peers: builds bench_nf4_linear, times bitsandbytes'
# matmul_4bit and torch's bf16 linear in the peers venv (bench/peers/venv.sh) on the same shapes
# and threads, then prints one table (docs/benchmarks.md keeps the latest).
# usage: bash bench/kernels/run_nf4_linear.sh [build-dir]   (env THREADS, SHAPES, TOKENS, REPS)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
threads=${THREADS:-$(nproc)}
shapes=${SHAPES:-4096x4096,11008x4096}
tokens=${TOKENS:-16,256}
reps=${REPS:-5}
[[ -f $build/CMakeCache.txt ]] || cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target bench_nf4_linear -j"$threads" >/dev/null
python=$(bash "$root/bench/peers/venv.sh" | tail -n 1)
peers=$(mktemp --suffix=.json)
trap 'rm -f "$peers"' EXIT
"$python" "$root/bench/kernels/nf4_peers.py" --shapes "$shapes" --tokens "$tokens" --threads "$threads" --reps "$reps" --out "$peers"
OMP_NUM_THREADS=$threads OMP_PROC_BIND=close "$build/bench/kernels/bench_nf4_linear" --shapes "$shapes" --tokens "$tokens" --reps "$reps" --peers "$peers"
