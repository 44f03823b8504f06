#!/usr/bin/env bash
# NVMe offload benchmarks: bench_swap (dsx's swap bandwidth beside fio, same disk, same run: both
# sides over the same sweep of settings, alternating, ROUNDS rounds), then the step-time cost of
# offload_optimizer / offload_param device "nvme" against no offload: the same 2-rank stage-3
# dsx train job in memory and swapped, step times from wall_clock_breakdown.
# usage: bash bench/swap/run_swap.sh [build-dir]   (env DIR: a directory on the disk to test,
#        MIB: bench_swap's file size, ROUNDS: its rounds, NO_THP=1: dsx's buffers in 4 KiB
#        pages as fio's are, TRAIN=0: bench_swap only,
#        MODEL: the dsx train preset, STEPS, SUB_GROUP: sub_group_size,
#        PARAM_BUFFER: offload_param.buffer_size)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
dir=${DIR:-${TMPDIR:-/tmp}}
mib=${MIB:-1024}
model=${MODEL:-gpt2-bench}
steps=${STEPS:-6}
sub_group=${SUB_GROUP:-2000000}
[[ -f $build/CMakeCache.txt ]] || cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
targets=(bench_swap)
[[ ${TRAIN:-1} == 0 ]] || targets+=(dsx)
cmake --build "$build" --target "${targets[@]}" -j"${JOBS:-2}" >/dev/null
work=$(mktemp -d "$dir/dsx-bench-swap-XXXXXX")
trap 'rm -rf "$work"' EXIT

"$build/bench/swap/bench_swap" --dir "$work" --mib "$mib" --rounds "${ROUNDS:-5}" ${NO_THP:+--no_thp}
[[ ${TRAIN:-1} == 0 ]] && exit 0

# $1: the offload block ("" for none). Prints the mean optimizer-step and whole-step ms of the
# job's steps after the first (wall_clock_breakdown's per-step times).
step_ms() {
  cat >"$work/ds_config.json" <<JSON
{"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
 "wall_clock_breakdown": true, "steps_per_print": 1,
 "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "weight_decay": 0.01}},
 "zero_optimization": {"stage": 3, "sub_group_size": $sub_group $1}}
JSON
  OMP_NUM_THREADS=1 "$build/dsx" launch --num_gpus 2 --master_port "${PORT:-29731}" "$build/dsx" train \
    --model "$model" --deepspeed_config "$work/ds_config.json" --steps "$steps" --eval_interval 0 \
    --progress plain --samples 0 2>&1 |
    sed -n 's/.*fwd: \([0-9.]*\) | bwd: \([0-9.]*\) | step: \([0-9.]*\).*/\1 \2 \3/p' |
    awk 'NR > 1 { s += $3; t += $1 + $2 + $3; n++ } END { if (n) printf "%.1f %.1f\n", s / n, t / n }'
}
mkdir -p "$work/nvme"
swap="\"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"$work/nvme\""
plain=$(step_ms "")
piped=$(step_ms ", $swap, \"pipeline_read\": true, \"pipeline_write\": true}")
serial=$(step_ms ", $swap}")
# offload_param "nvme" with max_in_cpu 0: every layer's shards come from the swap file each
# gather (DeepSpeed's default max_in_cpu, 1e9, would keep this whole model in memory).
params="\"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"$work/nvme\", \"max_in_cpu\": 0, \"buffer_size\": ${PARAM_BUFFER:-10000000}}"
param_only=$(step_ms ", $params")
both=$(step_ms ", $swap, \"pipeline_read\": true, \"pipeline_write\": true, \"buffer_count\": 6}, $params")
echo
echo "dsx train --model $model, 2 ranks, ZeRO stage 3, sub_group_size $sub_group, mean of steps 2-$steps"
echo
echo "| what is on NVMe | optimizer step ms | whole step ms | whole step vs in memory |"
echo "|---|---:|---:|---:|"
for row in "nothing (all in host memory):$plain" \
  "optimizer state + fp32 master, pipeline_read + pipeline_write:$piped" \
  "optimizer state + fp32 master, no pipelining:$serial" \
  "parameters (max_in_cpu 0):$param_only" \
  "parameters + optimizer state + fp32 master, pipelined:$both"; do
  name=${row%%:*}
  read -r opt whole <<<"${row#*:}"
  base=$(echo "$plain" | awk '{print $2}')
  awk -v n="$name" -v o="$opt" -v w="$whole" -v b="$base" 'BEGIN { printf "| %s | %s | %s | %.2f |\n", n, o, w, w / b }'
done
