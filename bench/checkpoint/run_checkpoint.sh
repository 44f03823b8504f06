#!/usr/bin/env bash
# The checkpoint benchmark with its peers: builds bench_checkpoint, times safetensors and
# torch.save/load in the peers venv (bench/peers/venv.sh) on the same tensors and directory,
# then prints one table (docs/benchmarks.md keeps the latest).
# usage: bash bench/checkpoint/run_checkpoint.sh [build-dir]   (env RANKS, MIB, REPS, DIR)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
ranks=${RANKS:-2}
mib=${MIB:-128}
reps=${REPS:-3}
dir=${DIR:-${TMPDIR:-/tmp}}
[[ -f $build/CMakeCache.txt ]] || cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target bench_checkpoint -j2 >/dev/null
python=$(bash "$root/bench/peers/venv.sh" | tail -n 1)
peers=$(mktemp --suffix=.json)
work=$(mktemp -d "$dir/dsx-bench-ckpt-XXXXXX")
trap 'rm -rf "$peers" "$work"' EXIT
"$python" "$root/bench/checkpoint/checkpoint_peers.py" --ranks "$ranks" --mib "$mib" --reps "$reps" --dir "$dir" --out "$peers"
"$build/bench/checkpoint/bench_checkpoint" --dir "$work" --ranks "$ranks" --mib "$mib" --reps "$reps" --peers "$peers"
