"""Builds the fixtures of LoRA runs that also train base tensors in full, as PEFT trains them:
  tests/models/data/llama_lora_saved/  the tiny Llama, adapters on q_proj and v_proj, and
                                       modules_to_save = ["lm_head", "embed_tokens"]
  tests/models/data/qwen2_lora_bias/   the tiny Qwen2 (q/k/v biases), adapters on q_proj and
                                       v_proj, bias = "all" (the adapted layers' biases and k_proj's)
Each folder holds what make_lora_fixtures.py writes for llama_lora (adapter_config.json and
adapter_model.safetensors as PeftModel.save_pretrained writes them, final_adapter.safetensors after
the steps, expected.json with the batches, losses and the trained model's logits). Weight decay
applies to 2-D tensors only, as dsx's ParamSpec.decay says (biases and norms are not decayed).
Run once by hand in the peers venv (with peft installed):

    .venv-peers/bin/python tests/models/compat/make_lora_trained_base_fixtures.py tests/models/data
"""

import json
import os
import sys

import peft
import safetensors.torch
import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_lora_fixtures import ROWS, SEQ, batches  # noqa: E402

transformers.logging.set_verbosity_error()

STEPS, LR, WEIGHT_DECAY = 12, 1e-2, 0.01
CASES = {
    "llama_lora_saved": ("llama", dict(bias="none", modules_to_save=["lm_head", "embed_tokens"])),
    "qwen2_lora_bias": ("qwen2", dict(bias="all")),
}


def lora_model(base_folder, extra):
    model = transformers.AutoModelForCausalLM.from_pretrained(base_folder, attn_implementation="eager")
    config = peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"],
                             task_type="CAUSAL_LM", **extra)
    torch.manual_seed(1234)
    model = peft.get_peft_model(model, config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(0.05 * torch.randn_like(p))
    return model


def train(model, steps):
    model.double()
    trainable = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in trainable if p.ndim == 2], "weight_decay": WEIGHT_DECAY},
              {"params": [p for p in trainable if p.ndim != 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=LR, betas=(0.9, 0.999), eps=1e-8)
    losses = []
    for inputs, targets in steps:
        logits = model(input_ids=inputs).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def make(data, name, base, extra):
    out = os.path.join(data, name)
    os.makedirs(out, exist_ok=True)
    model = lora_model(os.path.join(data, base), extra)
    model.save_pretrained(out)
    os.remove(os.path.join(out, "README.md"))
    config = model.base_model.model.config
    steps = batches(config.vocab_size)[:STEPS]
    losses = train(model, steps)
    state = peft.get_peft_model_state_dict(model)
    safetensors.torch.save_file({k: v.float().contiguous() for k, v in state.items()},
                                os.path.join(out, "final_adapter.safetensors"), metadata={"format": "pt"})
    eval_inputs = torch.randint(0, config.vocab_size, (2, SEQ), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        logits = model(input_ids=eval_inputs).logits
    expected = {
        "lr": LR, "weight_decay": WEIGHT_DECAY, "rows": ROWS, "seq": SEQ,
        "inputs": [s[0].tolist() for s in steps], "targets": [s[1].tolist() for s in steps],
        "losses": losses, "eval_inputs": eval_inputs.tolist(),
        "eval_logits": [float(f"{v:.9g}") for v in logits.reshape(-1).tolist()],
        "trained_in_full": sorted(k for k in state if "lora_" not in k),
        "peft": peft.__version__, "transformers": transformers.__version__, "torch": torch.__version__,
    }
    lines = [f"{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}" for k, v in expected.items()]
    with open(os.path.join(out, "expected.json"), "w") as f:
        f.write("{\n" + ",\n".join(lines) + "\n}\n")
    for file in sorted(os.listdir(out)):
        print(name, file, os.path.getsize(os.path.join(out, file)))
    print(name, "losses", losses[0], "->", losses[-1], "trained in full:", expected["trained_in_full"])


if __name__ == "__main__":
    data = sys.argv[1] if len(sys.argv) > 1 else "tests/models/data"
    for name, (base, extra) in CASES.items():
        make(data, name, base, extra)
