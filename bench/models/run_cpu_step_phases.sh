#!/usr/bin/env bash
# Where issue 36's fp32 CPU step goes, each phase beside its limit on this machine, measured in the
# same run: trains GPT-2 L6 C384 (gpt2-bench) at B2 x T256 on 2 ranks, ZeRO-2 with overlap_comm and
# gradient accumulation 2, one thread per rank (bench/models/cpu_step_job.json), with --profile;
# then times cblas_sgemm alone at every GEMM shape of the step and a one-core memcpy of 64 MiB
# (step_limits.c, one thread). Prints one table of rank 0's phases per step.
# BF16=1: the same job with ds_config bf16 enabled, each GEMM's limit oneDNN's bf16 matmul alone at
# the shapes dsx runs (the classifier in its vocabulary slices), the attention's products included.
# usage: bash bench/models/run_cpu_step_phases.sh [build-dir]   (env STEPS, TEXT, BF16, MASTER_PORT, DS_STEP_S)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(realpath -m "${1:-$root/build}")
steps=${STEPS:-6}
bf16=${BF16:-0}
[[ -f $build/CMakeCache.txt ]] || cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target dsx -j1 >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
blas_include=$(sed -n 's/^CBLAS_INCLUDE_DIR:PATH=//p' "$build/CMakeCache.txt")
job=$root/bench/models/cpu_step_job.json
if [[ $bf16 == 1 ]]; then
  cc -O2 -DSTEP_LIMITS_BF16 -I"$blas_include" -o "$work/step_limits" "$root/bench/models/step_limits.c" -lopenblas -ldnnl
  # The job file with "bf16": {"enabled": true} added after its opening brace.
  sed '0,/^{/s//{\n  "bf16": {"enabled": true},/' "$job" >"$work/job.json"
  job=$work/job.json
else
  cc -O2 -I"$blas_include" -o "$work/step_limits" "$root/bench/models/step_limits.c" -lopenblas
fi
text=${TEXT:-$work/text.txt}
[[ -n ${TEXT:-} ]] || cat "$root"/docs/*.md >"$text"

# The job, steps 3-5 traced (the default schedule).
(cd "$work" && OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$build/dsx" launch --num_gpus 2 --master_port "${MASTER_PORT:-29500}" "$build/dsx" train \
  --deepspeed_config "$job" --model gpt2-bench --data "text:$text" \
  --seq_len 256 --steps "$steps" --eval_interval 0 --samples 0 --profile "$work/trace" >"$work/train.log" 2>&1) ||
  { tail -20 "$work/train.log" >&2; exit 1; }

# The limits, on the same machine right after.
B=2 T=256 C=384 H=6 V=50257 L=6 ACC=2
rows=$((B * T)) hd=$((C / H)) bh=$((B * H))
# name transA transB M N K calls-per-step (forward: y = x W; backward: dx = dy W^T, dW = x^T dy)
gemm=sgemm
[[ $bf16 == 1 ]] && gemm=bf16gemm
shapes="$gemm peak_square N N 1024 1024 1024 0"
for lin in "qkv $C $((3 * C))" "attn_proj $C $C" "fc $C $((4 * C))" "mlp_proj $((4 * C)) $C"; do
  set -- $lin
  shapes+=$'\n'"$gemm fwd_$1 N N $rows $3 $2 $((L * ACC))"$'\n'"$gemm bwd_dx_$1 N T $rows $2 $3 $((L * ACC))"
  shapes+=$'\n'"$gemm bwd_dw_$1 T N $2 $3 $rows $((L * ACC))"
done
att=$((L * ACC * bh))  # one product per head and sample
shapes+=$'\n'"$gemm fwd_scores N T $T $T $hd $att"$'\n'"$gemm fwd_context N N $T $hd $T $att"
# backward of S = Q K^T and O = P V: dQ = dS K, dK = dS^T Q, dV = P^T dO (T x hd x T); dP = dO V^T
shapes+=$'\n'"$gemm bwd_attention_TxhdxT N N $T $hd $T $((3 * att))"$'\n'"$gemm bwd_attention_TxTxhd N T $T $T $hd $att"
if [[ $bf16 == 1 ]]; then  # kernels/cpu/bf16_matmul.cpp's slices of 2048 vocabulary rows, and the last one
  S=2048 slices=$((V / 2048)) tail=$((V % 2048))
  for part in "classifier $S $((slices * ACC))" "classifier_tail $tail $ACC"; do
    set -- $part
    shapes+=$'\n'"$gemm fwd_$1 N T $rows $2 $C $3"$'\n'"$gemm bwd_dx_$1 N N $rows $C $2 $3"
    shapes+=$'\n'"$gemm bwd_dw_$1 T N $2 $C $rows $3"
  done
else
  shapes+=$'\n'"sgemm fwd_classifier N T $rows $V $C $ACC"$'\n'"sgemm bwd_dx_classifier N N $rows $C $V $ACC"
  shapes+=$'\n'"sgemm bwd_dw_classifier T N $V $C $rows $ACC"
fi
shapes+=$'\n'"memcpy $((64 << 20))"
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$work/step_limits" <<<"$shapes" >"$work/limits.txt"

python3 "$root/bench/models/cpu_step_phases.py" "$work/trace/rank0.trace.json" "$work/limits.txt" \
  --rows "$rows" --vocab "$V" --accumulation "$ACC" $([[ $bf16 == 1 ]] && echo --bf16)
# The collective phases split into each rank's own work and its wait for the other; the GEMM bound
# beside DeepSpeed's s/step (env DS_STEP_S, from bench/zero/deepspeed_same_job.py).
python3 "$root/bench/models/cpu_step_ranks.py" "$work/limits.txt" "$work"/trace/rank*.trace.json \
  --deepspeed-seconds "${DS_STEP_S:-0}"
