#!/usr/bin/env bash
# dsx's Llama family beside transformers, on fresh random models made here (nothing downloaded):
# Llama (GQA, llama3 rope_scaling, untied head), Llama with attention_bias (linear rope_scaling,
# tied), Mistral (head_dim != hidden/heads, one kv head), Mistral with a sliding window as long as
# the batch's rows and Qwen2 (q/k/v biases, tied), each
# saved by save_pretrained. dsx reads each folder and runs LlamaCpu<float> forward and backward
# (tests/models/compat/llama_dump.cpp); its logits, loss and per-tensor gradient norms are compared
# with transformers' float64 ones, within fp32 tolerance (relative 1e-4). dsx also writes each
# model back (write_llama_hf_folder), and transformers must load that folder as it is and give the
# same logits as the original. Prints a table; exits 1 on any difference. Not run in CI.
#
#   bash tests/models/compat/check_llama_with_hf.sh [BUILD_DIR]      (default: build)
#
# With TRANSFORMERS4 set to a folder holding transformers 4.x (the peers venv has 5.x), dsx's
# exports are also loaded by 4.x, which reads config.json's older spelling:
#   .venv-peers/bin/pip install --target /tmp/tf4 --no-deps transformers==4.46.3 tokenizers==0.20.3 \
#       huggingface_hub==0.26.2 requests urllib3 charset_normalizer certifi idna
#   TRANSFORMERS4=/tmp/tf4 bash tests/models/compat/check_llama_with_hf.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
cd "$root"
python=$(bash "$root/bench/peers/venv.sh" | tail -1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --build "$build" --target llama_dump -j1 >/dev/null
dump="$build/tests/models/llama_dump"

# 1. Models, batches and transformers' values.
"$python" - "$work" <<'PY'
import json, os, sys
sys.path.insert(0, "tests/models/compat")
import torch, transformers
transformers.utils.logging.disable_progress_bar()
from make_llama_fixtures import batch, build, reference
work = sys.argv[1]
common = dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=8, intermediate_size=96,
              vocab_size=128, max_position_embeddings=256, rms_norm_eps=1e-5, attn_implementation="eager")
models = {
    "llama": (transformers.LlamaForCausalLM, transformers.LlamaConfig(
        num_key_value_heads=2, tie_word_embeddings=False, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 32}, **common)),
    "llama_bias": (transformers.LlamaForCausalLM, transformers.LlamaConfig(
        num_key_value_heads=4, attention_bias=True, tie_word_embeddings=True,
        rope_scaling={"rope_type": "linear", "factor": 2.0}, **common)),
    "mistral": (transformers.MistralForCausalLM, transformers.MistralConfig(
        num_key_value_heads=1, head_dim=16, sliding_window=None, rope_theta=1e6, **common)),
    # Mistral v0.1's kind of window, as long as the batch's rows (24): transformers masks by it,
    # dsx builds for at most 24 positions with full causal attention.
    "mistral_window": (transformers.MistralForCausalLM, transformers.MistralConfig(
        num_key_value_heads=2, sliding_window=24, rope_theta=1e4, **common)),
    "qwen2": (transformers.Qwen2ForCausalLM, transformers.Qwen2Config(
        num_key_value_heads=2, tie_word_embeddings=True, use_sliding_window=False, rope_theta=1e6, **common)),
}
for seed, (name, (cls, config)) in enumerate(models.items()):
    folder = os.path.join(work, name)
    build(cls, config, 4242 + seed).save_pretrained(folder)
    inputs, targets = batch(config.vocab_size, 99 + seed, rows=2, seq=24)
    ref = reference(folder, inputs, targets)
    ref["fp32"] = reference(folder, inputs, targets, torch.float32)  # transformers' own fp32 spread
    json.dump(ref, open(os.path.join(work, name + ".ref.json"), "w"))
PY

# 2. dsx on each folder, and its export.
for ref in "$work"/*.ref.json; do
  name=$(basename "$ref" .ref.json)
  "$dump" "$work/$name" "$ref" "$work/$name.dsx.json" "$work/$name.export"
done

# 3. The table.
"$python" - "$work" <<'PY'
import glob, json, os, sys
import torch, transformers
transformers.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()
work, tol, status = sys.argv[1], 1e-4, 0

def rel(a, b):
    a, b = torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()

print(f"{'model':<14} {'logits':>9} {'loss':>9} {'grad norm':>9} {'worst tensor':<42} {'hf fp32':>9} {'export':>9}")
for ref_file in sorted(glob.glob(os.path.join(work, "*.ref.json"))):
    name = os.path.basename(ref_file)[:-len(".ref.json")]
    ref, ours = json.load(open(ref_file)), json.load(open(os.path.join(work, name + ".dsx.json")))
    logits, loss = rel(ours["logits"], ref["logits"]), rel([ours["loss"]], [ref["loss"]])
    grads = {k: rel([ours["grad_norms"][k]], [v]) for k, v in ref["grad_norms"].items()}
    worst = max(grads, key=grads.get)
    missing = set(ref["grad_norms"]) ^ set(ours["grad_norms"])
    spread = rel(ref["fp32"]["logits"], ref["logits"])
    # dsx's export, loaded by transformers as it is: the same logits as the original (fp32 both).
    ids = torch.tensor(ref["inputs"])
    original = transformers.AutoModelForCausalLM.from_pretrained(os.path.join(work, name)).eval()
    exported = transformers.AutoModelForCausalLM.from_pretrained(os.path.join(work, name + ".export")).eval()
    with torch.no_grad():
        export = (original(input_ids=ids).logits - exported(input_ids=ids).logits).abs().max().item()
    ok = max(logits, loss, grads[worst]) <= tol and not missing and export == 0
    status |= not ok
    print(f"{name:<14} {logits:9.2e} {loss:9.2e} {grads[worst]:9.2e} {worst:<42} {spread:9.2e} "
          f"{export:9.2e}  {'ok' if ok else 'FAIL'}{' names differ: ' + str(missing) if missing else ''}")
print(f"dsx fp32 against transformers float64, max relative difference (tolerance {tol}); hf fp32: transformers'\n"
      f"own fp32 against its float64; export: max |logit difference| of dsx's written folder against the\n"
      f"original, both loaded by transformers in fp32 (must be 0)")
sys.exit(status)
PY

# 4. Optionally, transformers 4.x on dsx's exports: the same logits as 5.x on the originals.
[[ -n "${TRANSFORMERS4:-}" ]] || exit 0
PYTHONPATH=$TRANSFORMERS4 "$python" - "$work" <<'PY'
import glob, json, os, sys
import torch, transformers
transformers.logging.set_verbosity_error()
work, status = sys.argv[1], 0
for ref_file in sorted(glob.glob(os.path.join(work, "*.ref.json"))):
    name = os.path.basename(ref_file)[:-len(".ref.json")]
    ref = json.load(open(ref_file))
    model = transformers.AutoModelForCausalLM.from_pretrained(os.path.join(work, name + ".export"),
                                                              attn_implementation="eager").double().eval()
    with torch.no_grad():
        logits = model(input_ids=torch.tensor(ref["inputs"])).logits.reshape(-1)
    want = torch.tensor(ref["logits"], dtype=torch.float64).reshape(-1)
    diff = ((logits - want).abs().max() / want.abs().max()).item()
    status |= diff > 1e-6
    print(f"transformers {transformers.__version__} on dsx's export of {name}: logits max rel diff {diff:.2e} "
          f"against 5.x on the original (float64)  {'ok' if diff <= 1e-6 else 'FAIL'}")
sys.exit(status)
PY
