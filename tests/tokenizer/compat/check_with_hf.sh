#!/usr/bin/env bash
# dsx's token ids beside Hugging Face tokenizers', sentencepiece's and transformers' on a
# multilingual text of at least 1 MB made here (compat/multilingual_text.py: several scripts,
# emoji, combining marks, digit runs, whitespace runs, CRLF, and random code points), for every
# fixture tokenizer of tests/tokenizer/data/ (a LlamaTokenizer tokenizer.model folder against
# transformers only: dsx gives its ids, not sentencepiece's). Byte-identical id streams or it fails. Not run in CI (needs the venv).
#
#   bash tests/tokenizer/compat/check_with_hf.sh [BUILD_DIR]     (default build-tok)
#
# VENV (default /tmp/tokvenv) must have tokenizers and sentencepiece; with transformers there too,
# the ids of transformers.AutoTokenizer (tokenizer_config.json's rules) are compared as well:
#   python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install tokenizers sentencepiece transformers protobuf
# (transformers converts tokenizer.model to its fast tokenizer through protobuf; without it,
# transformers 5 tries tiktoken and fails)
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
build=${1:-$root/build-tok}
venv=${VENV:-/tmp/tokvenv}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --build "$build" --target tokenizer_dump_ids -j1 >/dev/null
"$venv/bin/python" - "$work/text.txt" <<'PY'
import sys
sys.path.insert(0, "tests/tokenizer/compat")
from multilingual_text import make_soup, make_text
text = make_text(20261203, 900_000) + make_soup(4242, 150_000) + make_text(99, 100_000)
open(sys.argv[1], "w", encoding="utf-8", newline="").write(text)
print(f"compat: text of {len(text.encode())} bytes, {len(text)} characters")
PY

status=0
for dir in "$root"/tests/tokenizer/data/*/; do
  name=$(basename "$dir")
  "$build/tests/tokenizer/tokenizer_dump_ids" "$dir" "$work/text.txt" "$work/$name.dsx" 2>/dev/null
  "$venv/bin/python" - "$dir" "$work/text.txt" "$work/$name.dsx" "$name" <<'PY' || status=1
import json, os, sys
folder, text_file, dsx_file, name = sys.argv[1:]
text = open(text_file, encoding="utf-8", newline="").read()
config_file = os.path.join(folder, "tokenizer_config.json")
config = json.load(open(config_file)) if os.path.exists(config_file) else {}
refs = {}
if os.path.exists(os.path.join(folder, "tokenizer.json")):
    from tokenizers import Tokenizer
    refs["tokenizers"] = Tokenizer.from_file(os.path.join(folder, "tokenizer.json")).encode(text).ids
elif config.get("tokenizer_class") not in ("LlamaTokenizer", "LlamaTokenizerFast"):
    # A LlamaTokenizer folder gives transformers' ids (below), not sentencepiece's.
    import sentencepiece
    sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(folder, "tokenizer.model"))
    refs["sentencepiece"] = [sp.bos_id()] + sp.encode(text)
ours = [int(line) for line in open(dsx_file)]
try:  # transformers, where installed: tokenizer_config.json's BOS/EOS rules applied by it
    import transformers
    transformers.logging.set_verbosity_error()
    refs["transformers"] = transformers.AutoTokenizer.from_pretrained(folder)(text)["input_ids"]
except ImportError:
    pass
failed = False
for lib, ref in refs.items():
    if ours == ref:
        print(f"compat: {name}: {len(ours)} ids, identical to {lib}")
        continue
    failed = True
    first = next((i for i, (a, b) in enumerate(zip(ours, ref)) if a != b), min(len(ours), len(ref)))
    print(f"compat: {name}: DIFFERENT from {lib} ({len(ours)} ids vs {len(ref)}), first at id {first}:")
    print(f"  dsx   {ours[max(0, first - 3):first + 5]}")
    print(f"  {lib} {ref[max(0, first - 3):first + 5]}")
sys.exit(1 if failed else 0)
PY
done
exit $status
