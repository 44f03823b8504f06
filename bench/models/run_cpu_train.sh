#!/usr/bin/env bash
# CPU training throughput of a preset: MODEL=gpt2-bench (6 layers, 384 channels, 6 heads, GPT-2
# vocabulary; default B 4, T 256) or MODEL=llama-bench (6 layers, 512 channels, GQA 8/2, vocabulary
# 32000; default B 2, T 512): dsx beside transformers' model of the same shape, eager and
# torch.compile, same threads, same run.
# ROUNDS rounds alternate dsx and the peers; each figure is the best step of all its rounds, so a
# burst of other load on the machine does not decide the ratio. Beside wall time, the CPU seconds
# each step used (all threads), which a loaded machine disturbs far less. Prints one table
# (docs/benchmarks.md keeps the latest).
# usage: bash bench/models/run_cpu_train.sh [build-dir]   (env MODEL, BATCH, SEQ, THREADS, STEPS, WARMUP, ROUNDS; BF16=1 adds dsx's bf16 row)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
threads=${THREADS:-$(nproc)}
steps=${STEPS:-5}
warmup=${WARMUP:-2}
rounds=${ROUNDS:-2}
model=${MODEL:-gpt2-bench}
if [[ $model == llama-bench ]]; then batch=${BATCH:-2} seq=${SEQ:-512}; else batch=${BATCH:-4} seq=${SEQ:-256}; fi
shape=(--batch "$batch" --seq "$seq")
[[ -f $build/CMakeCache.txt ]] || cmake -S "$root" -B "$build" >/dev/null
cmake --build "$build" --target bench_cpu_train -j"$threads" >/dev/null
python=$(bash "$root/bench/peers/venv.sh" | tail -n 1)
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for ((round = 0; round < rounds; ++round)); do
  OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads \
    "$build/bench/models/bench_cpu_train" --preset "$model" "${shape[@]}" --warmup "$warmup" --steps "$steps" >>"$results"
  if [[ ${BF16:-0} == 1 ]]; then  # dsx with ds_config bf16's GEMMs (bf16 operands, oneDNN)
    OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads \
      "$build/bench/models/bench_cpu_train" --preset "$model" "${shape[@]}" --warmup "$warmup" --steps "$steps" \
      --bf16 --name "dsx, bf16 GEMMs" >>"$results"
  fi
  # A machine-wide OPENBLAS_CORETYPE (some images pin Haswell, AVX2) overrides OpenBLAS's own
  # choice of kernels; the extra row shows dsx with the choice OpenBLAS makes for this CPU.
  if [[ -n ${OPENBLAS_CORETYPE:-} ]]; then
    env -u OPENBLAS_CORETYPE OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads" \
      "$build/bench/models/bench_cpu_train" --preset "$model" "${shape[@]}" --warmup "$warmup" --steps "$steps" \
      --name "dsx, OPENBLAS_CORETYPE unset" >>"$results"
  fi
  "$python" "$root/bench/models/cpu_train_peers.py" --model "$model" "${shape[@]}" --threads "$threads" \
    --warmup "$warmup" --steps "$steps" \
    2>/dev/null >>"$results"
done
"$python" - "$results" "$model" "$batch" "$seq" <<'PY'
import json, sys
best = {}
for r in (json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")):
    if r["impl"] not in best or r["step_s"] < best[r["impl"]]["step_s"]:
        best[r["impl"]] = r
rows = list(best.values())
ours = best["dsx"]
model, batch, seq = sys.argv[2], sys.argv[3], sys.argv[4]
shape = {"gpt2-bench": "GPT-2 L6 C384 H6 V50257", "llama-bench": "Llama L6 C512 F1376 GQA 8/2 V32000"}.get(model, model)
print(f"{shape}, B{batch} x T{seq}, fp32, forward+backward+AdamW, {ours['threads']} threads")
for r in rows:
    if "blas" in r:
        print(f"{r['impl']}: {r['blas']}")
print(f"| {'implementation':<30} | {'step (s)':>9} | {'tokens/s':>9} | {'dsx / this':>10} | {'CPU s/step':>10} | {'dsx / this (CPU)':>16} |")
print(f"|{'-'*32}|{'-'*11}|{'-'*11}|{'-'*12}|{'-'*12}|{'-'*18}|")
for r in rows:
    print(f"| {r['impl']:<30} | {r['step_s']:>9.3f} | {r['tokens_per_s']:>9.1f} | {ours['tokens_per_s'] / r['tokens_per_s']:>9.2f}x |"
          f" {r['cpu_s']:>10.3f} | {r['cpu_s'] / ours['cpu_s']:>15.2f}x |")
PY
