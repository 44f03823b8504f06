#!/usr/bin/env bash
# LoRA step time against full fine-tuning on the same model: dsx's llama-bench preset (6 layers,
# 512 channels, GQA 8/2, vocabulary 32000; B 2, T 512, fp32) trained in full and with LoRA
# adapters (r 16, alpha 32, TARGETS), beside transformers (full) and PEFT + transformers (LoRA) on
# the same shape, eager, same threads, same run. ROUNDS rounds alternate dsx and the peers; each
# figure is the best step of all rounds. Prints one table (docs/benchmarks.md keeps the latest).
# usage: bash bench/models/run_lora_step.sh [build-dir]   (env TARGETS, THREADS, STEPS, WARMUP, ROUNDS)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
threads=${THREADS:-$(nproc)}
steps=${STEPS:-3}
warmup=${WARMUP:-1}
rounds=${ROUNDS:-2}
targets=${TARGETS:-q_proj,v_proj}
shape=(--preset llama-bench --batch 2 --seq 512 --warmup "$warmup" --steps "$steps")
[[ -f $build/CMakeCache.txt ]] || cmake -S "$root" -B "$build" >/dev/null
cmake --build "$build" --target bench_cpu_train -j"$threads" >/dev/null
python=$(bash "$root/bench/peers/venv.sh" | tail -n 1)
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for ((round = 0; round < rounds; ++round)); do
  export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
  "$build/bench/models/bench_cpu_train" "${shape[@]}" --name "dsx full" >>"$results"
  "$build/bench/models/bench_cpu_train" "${shape[@]}" --name "dsx LoRA" --lora "r=16,alpha=32,targets=$targets" >>"$results"
  "$python" "$root/bench/models/lora_step_peers.py" --threads "$threads" --targets "$targets" --r 16 \
    --warmup "$warmup" --steps "$steps" 2>/dev/null >>"$results"
done
"$python" - "$results" "$targets" <<'PY'
import json, sys
best = {}
for r in (json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")):
    if r["impl"] not in best or r["step_s"] < best[r["impl"]]["step_s"]:
        best[r["impl"]] = r
full = {"dsx": best["dsx full"], "peer": best["transformers full"]}
lora = {"dsx": best["dsx LoRA"], "peer": best["PEFT LoRA"]}
print(f"Llama L6 C512 F1376 GQA 8/2 V32000, B2 x T512, fp32, forward+backward+AdamW; LoRA r16 on {sys.argv[2]}")
print("(CPU s: the CPU time the process used for its best step, all threads; a loaded machine disturbs it far less)")
print(f"| {'':<28} | {'full step (s)':>13} | {'LoRA step (s)':>13} | {'full CPU s':>10} | {'LoRA CPU s':>10} | {'LoRA / full (CPU)':>17} |")
print(f"|{'-'*30}|{'-'*15}|{'-'*15}|{'-'*12}|{'-'*12}|{'-'*19}|")
for who, name in (("dsx", "dsx"), ("peer", "PEFT + transformers (eager)")):
    f, l = full[who], lora[who]
    print(f"| {name:<28} | {f['step_s']:>13.3f} | {l['step_s']:>13.3f} | {f['cpu_s']:>10.3f} | {l['cpu_s']:>10.3f} |"
          f" {l['cpu_s'] / f['cpu_s']:>16.2f}x |")
print(f"PEFT / dsx, CPU s per step: LoRA {lora['peer']['cpu_s'] / lora['dsx']['cpu_s']:.2f}x,"
      f" full {full['peer']['cpu_s'] / full['dsx']['cpu_s']:.2f}x")
PY
