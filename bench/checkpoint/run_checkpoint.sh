#!/usr/bin/env bash
# The checkpoint benchmark with its peers: builds bench_checkpoint, times safetensors and
# torch.save/load in the peers venv (bench/peers/venv.sh) on the same tensors and directory,
# then prints one table per round (docs/benchmarks.md keeps the latest). BASELINE=<an older
# build's bench_checkpoint> also times that build's load in each round, for a before/after.
# usage: bash bench/checkpoint/run_checkpoint.sh [build-dir]   (env RANKS, MIB, REPS, ROUNDS, DIR, BASELINE)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
ranks=${RANKS:-2}
mib=${MIB:-128}
reps=${REPS:-3}
rounds=${ROUNDS:-1}
dir=${DIR:-${TMPDIR:-/tmp}}
baseline=${BASELINE:-}
[[ -f $build/CMakeCache.txt ]] || cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target bench_checkpoint -j2 >/dev/null
python=$(bash "$root/bench/peers/venv.sh" | tail -n 1)
peers=$(mktemp --suffix=.json)
work=$(mktemp -d "$dir/dsx-bench-ckpt-XXXXXX")
trap 'rm -rf "$peers" "$work"' EXIT
args=(--dir "$work" --ranks "$ranks" --mib "$mib" --reps "$reps")
for ((round = 1; round <= rounds; ++round)); do
  "$python" "$root/bench/checkpoint/checkpoint_peers.py" --ranks "$ranks" --mib "$mib" --reps "$reps" --dir "$dir" --out "$peers"
  extra=()
  if [[ -n $baseline ]]; then
    # The baseline's own table; its load rows' seconds go into this round's table.
    table=$("$baseline" "${args[@]}")
    rm -rf "${work:?}"/*
    seconds_of() { awk -F'|' -v row="$1" 'index($0, row) {gsub(/ /, "", $3); print $3}' <<<"$table"; }
    extra=(--baseline-load "$(seconds_of 'dsx load: open, CRC verify, parse, copy out')")
    in_place=$(seconds_of 'dsx load: open, CRC verify, parse, sum in place')
    [[ -z $in_place ]] || extra+=(--baseline-in-place "$in_place")
  fi
  echo "round $round of $rounds"
  "$build/bench/checkpoint/bench_checkpoint" "${args[@]}" --peers "$peers" "${extra[@]}"
  rm -rf "${work:?}"/*
done
