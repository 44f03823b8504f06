#!/usr/bin/env bash
# Tokenizer throughput, dsx beside Hugging Face tokenizers, one thread and all threads, same text
# and same run (docs/benchmarks.md keeps the latest table). The text: SIZE_MB of the multilingual
# generator of tests/tokenizer/compat. The tokenizers: the test fixtures (vocabularies of
# 600-1000; spm_json is SentencePiece-style BPE, as Llama 2 and Mistral tokenizer.json files are) and
# a Llama 3-style one with a 32000 vocabulary trained here on the same generator,
# closer to real vocabularies, where more words are single tokens.
# usage: bash bench/tokenizer/run_tokenizer_bench.sh [build-dir]   (env THREADS, REPS, SIZE_MB, VENV)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
threads=${THREADS:-$(nproc)}
reps=${REPS:-3}
size_mb=${SIZE_MB:-4}
venv=${VENV:-/tmp/tokvenv}
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c "import tokenizers" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q tokenizers
fi
[[ -f $build/CMakeCache.txt ]] || cmake -S "$root" -B "$build" >/dev/null
cmake --build "$build" --target bench_tokenizer -j1 >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$venv/bin/python" - "$work" "$size_mb" <<'PY'
import os, sys
sys.path.insert(0, "tests/tokenizer/compat")
from multilingual_text import make_text
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
work, size_mb = sys.argv[1], float(sys.argv[2])
open(os.path.join(work, "text.txt"), "w", newline="").write(make_text(31337, int(size_mb * 1e6 * 0.65)))
pattern = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
           r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
tok = Tokenizer(models.BPE(ignore_merges=True))
tok.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
tok.decoder = decoders.ByteLevel()
corpus = [make_text(seed, 5000) for seed in range(1000, 1400)]
tok.train_from_iterator(corpus, trainers.BpeTrainer(
    vocab_size=32000, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
os.makedirs(os.path.join(work, "llama3-32k"))
tok.save(os.path.join(work, "llama3-32k", "tokenizer.json"))
PY
cd "$root"
data=tests/tokenizer/data
"$build/bench/tokenizer/bench_tokenizer" --text "$work/text.txt" --threads "$threads" --reps "$reps" \
  --python "$venv/bin/python" --model $data/gpt2 --model $data/llama3 --model $data/qwen2 \
  --model $data/spm_json --model "$work/llama3-32k"
