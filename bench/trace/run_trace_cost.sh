#!/usr/bin/env bash
# What tracing costs: the README's main job (configs/quickstart.json, 2 ranks) with tracing off,
# with --profile's default schedule (3 steps of the run traced), and with every step traced.
# Runs interleaved, REPS of each; prints the median tokens/s of each beside tracing off.
# Then, from bench_span_cost's ns per span and the spans a traced step records, what the
# instrumentation costs a step with tracing off and on.
# Usage: bench/trace/run_trace_cost.sh [path/to/dsx] [steps] [reps] [path/to/bench_span_cost]
set -euo pipefail
dsx=${1:-build/dsx}
steps=${2:-600}
reps=${3:-3}
span_bench=${4:-$(dirname "$dsx")/bench/trace/bench_span_cost}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$(dirname "$0")/../.."

run() {  # run MODE-ARGS... : prints tokens/s of one run
  local out
  out=$(OMP_NUM_THREADS=1 "$dsx" launch --num_gpus 2 --master_port "$((20000 + RANDOM % 20000))" \
    "$dsx" train --deepspeed_config configs/quickstart.json --steps "$steps" --eval_interval 0 \
    --samples 0 --progress plain "$@" 2>&1)
  # "throughput     31.7k tokens/s": the summary's figure, with its k
  sed -n 's/.*throughput *\([0-9.]*\)\(k\{0,1\}\) tokens.*/\1 \2/p' <<<"$out" |
    awk '{ print ($2 == "k" ? $1 * 1000 : $1); exit }'
}

median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }

declare -A results
modes=(off default every)
for ((i = 0; i < reps; i++)); do
  for mode in "${modes[@]}"; do
    case $mode in
      off) v=$(run) ;;
      default) v=$(run --profile "$work/default") ;;
      every) v=$(run --profile "$work/every" --profile_schedule "0,0,$steps,1") ;;
    esac
    results[$mode]+="$v"$'\n'
  done
done

off=$(printf '%s' "${results[off]}" | median)
echo "main job (configs/quickstart.json, 2 ranks, $steps steps), median of $reps runs each"
printf '| %-40s | %10s | %8s |\n' "tracing" "tokens/s" "vs off"
printf '|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..42})" "$(printf -- '-%.0s' {1..12})" "$(printf -- '-%.0s' {1..10})"
for mode in "${modes[@]}"; do
  v=$(printf '%s' "${results[$mode]}" | median)
  case $mode in
    off) label="off (no --profile)" ;;
    default) label="--profile, default schedule 1,1,3,1" ;;
    every) label="--profile, every step traced" ;;
  esac
  printf '| %-40s | %10.0f | %7.3fx |\n' "$label" "$v" "$(awk -v a="$v" -v b="$off" 'BEGIN { print a / b }')"
done

echo
"$span_bench"
# Spans per step and the step's length, from rank 0's fully traced run.
read -r per_step step_us < <(python3 - "$work/every/rank0.trace.json" <<'PY'
import json, sys
events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
steps = [e for e in events if e["name"].startswith("ProfilerStep#")]
print(len(events) / len(steps), sum(e["dur"] for e in steps) / len(steps))
PY
)
off_ns=$("$span_bench" | awk -F'|' '/tracing off/ { print $3 }')
on_ns=$("$span_bench" | awk -F'|' '/tracing on/ { print $3 }')
awk -v n="$per_step" -v us="$step_us" -v off="$off_ns" -v on="$on_ns" 'BEGIN {
  printf "\nrank 0 records %.0f spans per step of %.0f us: tracing off costs %.2f us per step (%.4f%%), on %.1f us (%.2f%%)\n",
    n, us, n * off / 1000, 100 * n * off / 1000 / us, n * on / 1000, 100 * n * on / 1000 / us }'
