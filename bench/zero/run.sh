#!/usr/bin/env bash
# ZeRO on this machine: the byte-small GPT-2 trained by 2 ranks (dsx launch) at each ZeRO stage,
# overlap_comm on and off, and at stages 1-3 with reduce_scatter off. Prints tokens/s, the share of
# gradient communication hidden behind backward, the megabytes rank 0 sends per step (every
# collective the comms logger saw, times nccl-tests' bus factor: what a ring moves per rank), and
# the model-state bytes rank 0 holds beside what the stage's formula promises.
# Usage: bash bench/zero/run.sh [BUILD_DIR]   (env STEPS, default 60)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
dsx=$build/dsx
[[ -x $dsx ]] || { echo "bench/zero: build dsx first (bash tools/build.sh)" >&2; exit 1; }
steps=${STEPS:-60}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1

printf '| stage | overlap_comm | reduce_scatter | tokens/s | comm hidden | MB sent/step | rank 0 params+grads+optimizer MB | formula MB | ratio |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
run() {
  local stage=$1 overlap=$2 scatter=$3
  cat > "$work/ds.json" <<JSON
{"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 1, "gradient_clipping": 1.0,
 "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "comms_logger": {"enabled": true},
 "zero_optimization": {"stage": $stage, "overlap_comm": $overlap, "reduce_scatter": $scatter,
                       "reduce_bucket_size": 200000,
                       "stage3_prefetch_bucket_size": 200000, "stage3_param_persistence_threshold": 1000}}
JSON
  local out
  out=$("$dsx" launch --num_gpus 2 --master_port $((29700 + stage * 2)) "$dsx" train --deepspeed_config "$work/ds.json" \
    --model byte-small --data text:README.md --steps "$steps" --eval_interval 0 --samples 0 --progress plain 2>&1 \
    | sed -n 's/^\[rank0\]: //p')
  python3 - "$stage" "$overlap" "$scatter" "$steps" <<PY
import re, sys
out = """$out"""
stage, overlap, scatter, steps = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
params = int(re.search(r"\((\d+) parameters\)", out).group(1))
rate = re.search(r"throughput\s+([\d.]+k?) tokens/s", out).group(1)
hidden = re.search(r"(\d+)% hidden", out).group(1)
m = re.search(r"params ([\d.e+]+) MB, grads ([\d.e+]+) MB, optimizer ([\d.e+]+) MB", out)
held = sum(float(x) for x in m.groups())
n, psi = 2, params
# comms_logger rows: op (blank when repeated), message size, count; bus factors for 2 ranks
factor = {"all_reduce": 2 * (n - 1) / n, "reduce_scatter": (n - 1) / n, "all_gather": (n - 1) / n, "broadcast": 1.0,
          "send": 1.0, "recv": 0.0}
unit = {"B": 1, "KB": 1024, "MB": 1 << 20, "GB": 1 << 30}
sent, op = 0.0, ""
table = out.split("comms_logger (rank 0):", 1)[1] if "comms_logger (rank 0):" in out else ""
for line in table.splitlines():
    row = re.match(r"^(\S*)\s+([\d.]+) (B|KB|MB|GB)\s+(\d+)\s", line)
    if not row:
        continue
    op = row.group(1) or op
    sent += float(row.group(2)) * unit[row.group(3)] * int(row.group(4)) * factor.get(op, 1.0)
padded = -(-psi // (2 * n)) * (2 * n)
# fp32 on the CPU: 4 B params, 4 B grads, 8 B Adam moments per element (params are the master copy)
formula = {0: 16 * psi, 1: 8 * padded + 8 * padded / n, 2: 4 * padded + 12 * padded / n, 3: 16 * psi / n}[stage] / 1e6
print(f"| {stage} | {overlap} | {scatter} | {rate} | {hidden}% | {sent / steps / 1e6:.2f} | {held:.2f} | {formula:.2f} | {held / formula:.3f} |")
PY
}
for stage in 0 1 2 3; do
  for overlap in true false; do run "$stage" "$overlap" true; done
  if [[ $stage -gt 0 ]]; then run "$stage" true false; fi
done
