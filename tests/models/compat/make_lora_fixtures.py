"""Builds tests/models/data/llama_lora/: what PEFT + transformers compute when they train LoRA
adapters on the tiny Llama of tests/models/data/llama, so the C++ tests check dsx's LoRA step by
step without running Python. Run once by hand in the peers venv (with peft installed):

    .venv-peers/bin/python tests/models/compat/make_lora_fixtures.py tests/models/data

Written into llama_lora/:
  adapter_config.json, adapter_model.safetensors   the initial adapter, as PeftModel.save_pretrained
                                                   writes it (A as PEFT initialises it, B made
                                                   non-zero so every tensor moves from step 1)
  final_adapter.safetensors                        the adapter after the 20 steps (float64 run, in F32)
  expected.json                                    the batches, the loss before each step, and the
                                                   logits of the trained model on `eval_inputs`

The reference runs in float64 (a higher precision than dsx's float32): torch.optim.AdamW, no
clipping, on global batches of 4 rows of 8 tokens (2 ranks x micro-batch 2 in dsx).
"""

import json
import os
import sys

import peft
import safetensors.torch
import torch
import transformers

transformers.logging.set_verbosity_error()

STEPS, ROWS, SEQ = 20, 4, 8
LR, WEIGHT_DECAY = 1e-2, 0.01
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def lora_model(base_folder):
    model = transformers.AutoModelForCausalLM.from_pretrained(base_folder, attn_implementation="eager")
    config = peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=TARGETS, bias="none",
                             task_type="CAUSAL_LM")
    torch.manual_seed(1234)
    model = peft.get_peft_model(model, config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(0.05 * torch.randn_like(p))
    return model


def batches(vocab):
    g = torch.Generator().manual_seed(99)
    steps = []
    for _ in range(STEPS):
        inputs = torch.randint(0, vocab, (ROWS, SEQ), generator=g)
        targets = torch.randint(0, vocab, (ROWS, SEQ), generator=g)
        steps.append((inputs, targets))
    return steps


def train(model, steps):
    model.double()
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=WEIGHT_DECAY)
    losses = []
    for inputs, targets in steps:
        logits = model(input_ids=inputs).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main(data):
    base = os.path.join(data, "llama")
    out = os.path.join(data, "llama_lora")
    os.makedirs(out, exist_ok=True)
    model = lora_model(base)
    model.save_pretrained(out)  # adapter_config.json + adapter_model.safetensors, float32
    os.remove(os.path.join(out, "README.md"))  # PEFT's model card: nothing the tests read
    config = model.base_model.model.config
    steps = batches(config.vocab_size)
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
        "peft": peft.__version__, "transformers": transformers.__version__, "torch": torch.__version__,
    }
    lines = [f"{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}" for k, v in expected.items()]
    with open(os.path.join(out, "expected.json"), "w") as f:
        f.write("{\n" + ",\n".join(lines) + "\n}\n")
    for name in sorted(os.listdir(out)):
        print(name, os.path.getsize(os.path.join(out, name)))
    print("losses", losses[0], "->", losses[-1])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/models/data")
