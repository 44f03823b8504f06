#!/usr/bin/env bash
# PEFT loads dsx's LoRA adapter, and its logits equal dsx's. On the tiny transformers Llama of
# tests/models/data/llama: `dsx train --lora` (two ranks, ZeRO STAGE, default 3) trains adapters on all linear
# layers (lr 0.02) from llm.c token shards written here, `dsx export --peft` writes the adapter folder;
# PeftModel.from_pretrained(base, folder) must load it (strictly: every adapter tensor found, no
# tensor left over) and its float32 logits on a fixed batch must equal dsx's (lora_dump) within
# fp32 rounding. Prints the largest difference; exits 1 on failure. Not run in CI (needs torch).
# BASE names another fixture folder (e.g. qwen2) and LORA another --lora, e.g. one that trains base
# tensors in full: LORA=r=4,targets=q_proj,v_proj,modules_to_save=lm_head,embed_tokens, or
# BASE=tests/models/data/qwen2 LORA=r=4,targets=q_proj,v_proj,bias=all.
#
#   [STAGE=0..3] [BASE=dir] [LORA=...] bash tests/models/compat/check_lora_with_peft.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
cd "$root"
python=$(bash "$root/bench/peers/venv.sh" | tail -1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --build "$build" --target dsx lora_dump -j1 >/dev/null
base=${BASE:-tests/models/data/llama}

# Token shards (llm.c format: 256 int32 header, magic 20240520, version 1, uint16 tokens) and a batch.
"$python" - "$work" "${STAGE:-3}" <<'PY'
import json, struct, sys, random
work = sys.argv[1]
rng = random.Random(3)
tokens = [rng.randrange(64) for _ in range(4096)]
header = [20240520, 1, len(tokens)] + [0] * 253
with open(f"{work}/train_000.bin", "wb") as f:
    f.write(struct.pack("<256i", *header) + struct.pack(f"<{len(tokens)}H", *tokens))
json.dump({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
           "optimizer": {"type": "AdamW", "params": {"lr": 0.02}}, "zero_optimization": {"stage": int(sys.argv[2])}},
          open(f"{work}/ds_config.json", "w"))  # a large lr, so that the adapter moves far from its init
json.dump({"vocab_size": 64}, open(f"{work}/tokenize.json", "w"))  # what dsx tokenize writes beside shards
json.dump({"inputs": [[rng.randrange(64) for _ in range(8)] for _ in range(2)]}, open(f"{work}/batch.json", "w"))
PY
OMP_NUM_THREADS=1 "$build/dsx" launch --num_gpus 2 "$build/dsx" train --progress plain \
  --deepspeed_config "$work/ds_config.json" --model "$base" --data "shards:$work/train_*.bin" --seq_len 8 \
  --lora "${LORA:-r=4,alpha=16,dropout=0.1,targets=all-linear}" --steps 10 --save "$work/run" >"$work/train.log" 2>&1 ||
  { cat "$work/train.log"; exit 1; }
"$build/dsx" export "$work/run" --peft "$work/peft" >/dev/null
"$build/tests/models/lora_dump" "$base" "$work/peft" "$work/batch.json" "$work/dsx.json"

"$python" - "$base" "$work" <<'PY'
import json, sys
import peft, torch, transformers
transformers.logging.set_verbosity_error()
base, work = sys.argv[1], sys.argv[2]
model = transformers.AutoModelForCausalLM.from_pretrained(base, attn_implementation="eager")
model = peft.PeftModel.from_pretrained(model, f"{work}/peft")
model.eval()
state = peft.get_peft_model_state_dict(model)
import safetensors.torch
saved = safetensors.torch.load_file(f"{work}/peft/adapter_model.safetensors")
assert set(saved) == set(state), f"tensor names differ: {sorted(set(saved) ^ set(state))[:4]}"
for k, v in saved.items():
    assert torch.equal(v, state[k]), f"{k} was not loaded as saved"
trained = max(v.abs().max().item() for k, v in saved.items() if "lora_B" in k)
inputs = torch.tensor(json.load(open(f"{work}/batch.json"))["inputs"])
with torch.no_grad():
    logits = model(input_ids=inputs).logits.reshape(-1)
ours = torch.tensor(json.load(open(f"{work}/dsx.json"))["logits"])
diff = (logits - ours).abs().max().item()
print(f"PEFT {peft.__version__} loaded dsx's adapter ({len(saved)} tensors, largest |lora_B| {trained:.3g}); "
      f"largest logit difference {diff:.3g} over {ours.numel()} logits")
sys.exit(0 if diff < 2e-5 and trained > 0 else 1)
PY
