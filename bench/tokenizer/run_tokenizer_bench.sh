#!/usr/bin/env bash
# Tokenizer speed, dsx beside Hugging Face tokenizers and sentencepiece, in the same run
# (docs/benchmarks.md keeps the latest tables). Makes SIZE_MB of the multilingual generator of
# tests/tokenizer/compat and 32k-vocabulary tokenizers trained on it (make_bench_inputs.py), then:
#   1. end to end (the headline): `dsx tokenize` against a Python process that does the same job
#      with tokenizers' encode_batch or sentencepiece's encode on all threads (end_to_end.py);
#   2. the encode phase alone, 1 thread and all threads (bench_tokenizer), unless ENCODE_PHASE=0.
# The peers come from the shared peers venv (bench/peers/venv.sh).
# usage: bash bench/tokenizer/run_tokenizer_bench.sh [build-dir]
#        (env REPS, SIZE_MB, ENCODE_PHASE; DSX_PEERS_VENV: where the peers venv is or goes)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
reps=${REPS:-3}
size_mb=${SIZE_MB:-32}
python=$(bash "$root/bench/peers/venv.sh" | tail -n 1)
[[ -f $build/CMakeCache.txt ]] || cmake -S "$root" -B "$build" >/dev/null
cmake --build "$build" --target dsx bench_tokenizer -j1 >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" "$root/bench/tokenizer/make_bench_inputs.py" "$work" "$size_mb"
models=("$work/gpt2-32k" "$work/llama3-32k" "$work/qwen2-32k" "$work/spm-bpe-32k-json"
        "$work/spm-bpe-32k" "$work/spm-uni-32k")
echo "## End to end ($(date -u +%F), $(uname -m), load average $(cut -d' ' -f1-3 /proc/loadavg))"
"$python" "$root/bench/tokenizer/end_to_end.py" --dsx "$build/dsx" --text "$work/text.txt" \
  --reps "$reps" "${models[@]}"
[[ ${ENCODE_PHASE:-1} == 0 ]] && exit 0
echo
echo "## Encode phase only (load average $(cut -d' ' -f1-3 /proc/loadavg))"
json_models=()
for m in "${models[@]}"; do [[ -f $m/tokenizer.json ]] && json_models+=(--model "$m"); done
"$build/bench/tokenizer/bench_tokenizer" --text "$work/text.txt" --threads "$(nproc)" \
  --reps "$reps" --python "$python" "${json_models[@]}"
