#!/usr/bin/env bash
# CPU GPT-2 training throughput (6 layers, 384 channels, 6 heads, GPT-2 vocabulary, T 256, B 4):
# dsx beside transformers' GPT2LMHeadModel eager and torch.compile, same threads, same run.
# ROUNDS rounds alternate dsx and the peers; each figure is the best step of all its rounds, so a
# burst of other load on the machine does not decide the ratio. Beside wall time, the CPU seconds
# each step used (all threads), which a loaded machine disturbs far less. Prints one table
# (docs/benchmarks.md keeps the latest).
# usage: bash bench/models/run_gpt2_cpu.sh [build-dir]   (env THREADS, STEPS, WARMUP, ROUNDS)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
threads=${THREADS:-$(nproc)}
steps=${STEPS:-5}
warmup=${WARMUP:-2}
rounds=${ROUNDS:-2}
[[ -f $build/CMakeCache.txt ]] || cmake -S "$root" -B "$build" >/dev/null
cmake --build "$build" --target bench_gpt2_cpu -j"$threads" >/dev/null
python=$(bash "$root/bench/peers/venv.sh" | tail -n 1)
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for ((round = 0; round < rounds; ++round)); do
  OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads \
    "$build/bench/models/bench_gpt2_cpu" --warmup "$warmup" --steps "$steps" >>"$results"
  # A machine-wide OPENBLAS_CORETYPE (some images pin Haswell, AVX2) overrides OpenBLAS's own
  # choice of kernels; the extra row shows dsx with the choice OpenBLAS makes for this CPU.
  if [[ -n ${OPENBLAS_CORETYPE:-} ]]; then
    env -u OPENBLAS_CORETYPE OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads" \
      "$build/bench/models/bench_gpt2_cpu" --warmup "$warmup" --steps "$steps" \
      --name "dsx, OPENBLAS_CORETYPE unset" >>"$results"
  fi
  "$python" "$root/bench/models/gpt2_cpu_peers.py" --threads "$threads" --warmup "$warmup" --steps "$steps" \
    2>/dev/null >>"$results"
done
"$python" - "$results" <<'PY'
import json, sys
best = {}
for r in (json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")):
    if r["impl"] not in best or r["step_s"] < best[r["impl"]]["step_s"]:
        best[r["impl"]] = r
rows = list(best.values())
ours = best["dsx"]
print(f"GPT-2 L6 C384 H6 V50257, B4 x T256, fp32, forward+backward+AdamW, {ours['threads']} threads")
for r in rows:
    if "blas" in r:
        print(f"{r['impl']}: {r['blas']}")
print(f"| {'implementation':<30} | {'step (s)':>9} | {'tokens/s':>9} | {'dsx / this':>10} | {'CPU s/step':>10} | {'dsx / this (CPU)':>16} |")
print(f"|{'-'*32}|{'-'*11}|{'-'*11}|{'-'*12}|{'-'*12}|{'-'*18}|")
for r in rows:
    print(f"| {r['impl']:<30} | {r['step_s']:>9.3f} | {r['tokens_per_s']:>9.1f} | {ours['tokens_per_s'] / r['tokens_per_s']:>9.2f}x |"
          f" {r['cpu_s']:>10.3f} | {r['cpu_s'] / ours['cpu_s']:>15.2f}x |")
PY
