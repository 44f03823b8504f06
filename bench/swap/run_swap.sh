#!/usr/bin/env bash
# NVMe offload benchmarks: bench_swap (dsx's swap bandwidth beside fio, same disk, same run), then
# the step-time cost of offload_optimizer.device "nvme" against no offload: the same 2-rank
# stage-3 dsx train job twice, swap files and checkpoints off, throughput from its summary.
# usage: bash bench/swap/run_swap.sh [build-dir]   (env DIR: a directory on the disk to test,
#        MIB: bench_swap's file size, MODEL: the dsx train preset, STEPS)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
dir=${DIR:-${TMPDIR:-/tmp}}
mib=${MIB:-1024}
model=${MODEL:-gpt2-124M}
steps=${STEPS:-4}
[[ -f $build/CMakeCache.txt ]] || cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target bench_swap dsx -j2 >/dev/null
work=$(mktemp -d "$dir/dsx-bench-swap-XXXXXX")
trap 'rm -rf "$work"' EXIT

"$build/bench/swap/bench_swap" --dir "$work" --mib "$mib"

# $1: the offload block ("" for none). Prints the job's tokens/s.
tokens_per_second() {
  cat >"$work/ds_config.json" <<JSON
{"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
 "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "weight_decay": 0.01}},
 "zero_optimization": {"stage": 3, "sub_group_size": 100000000 $1}}
JSON
  OMP_NUM_THREADS=1 "$build/dsx" launch --num_gpus 2 --master_port "${PORT:-29731}" "$build/dsx" train \
    --model "$model" --deepspeed_config "$work/ds_config.json" --steps "$steps" --eval_interval 0 \
    --progress plain --samples 0 2>&1 | sed -n 's/.*throughput *\([0-9.]*\)\(k\?\) tokens\/s.*/\1 \2/p' |
    awk '{print ($2 == "k") ? $1 * 1000 : $1}'
}
mkdir -p "$work/nvme"
plain=$(tokens_per_second "")
nvme=$(tokens_per_second ", \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"$work/nvme\",
  \"pipeline_read\": true, \"pipeline_write\": true}")
echo
echo "dsx train --model $model, 2 ranks, ZeRO stage 3, $steps steps, sub_group_size 1e8"
echo
echo "| optimizer state | tokens/s | step time vs in memory |"
echo "|---|---:|---:|"
echo "| in host memory | $plain | 1.00 |"
awk -v p="$plain" -v n="$nvme" 'BEGIN { printf "| swapped to NVMe (pipelined) | %s | %.2f |\n", n, p / n }'
