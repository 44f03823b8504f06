"""Builds the GPT-2 LoRA fixtures:
  tests/models/data/gpt2/        a tiny transformers GPT2LMHeadModel (2 layers, 32 channels, 4 heads,
                                 vocab 64, 16 positions), as save_pretrained writes it
  tests/models/data/gpt2_lora/   what PEFT + transformers compute when they train LoRA adapters on it,
                                 targets c_attn, c_proj, c_fc (Conv1D: fan_in_fan_out=True), in the
                                 files make_lora_fixtures.py writes for llama_lora
The reference trains in float64 with torch.optim.AdamW (weight decay on the 2-D adapter tensors),
no clipping, global batches of 4 rows of 8 tokens. Run once by hand in the peers venv:

    .venv-peers/bin/python tests/models/compat/make_gpt2_lora_fixtures.py tests/models/data
"""

import os
import sys

import peft
import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_lora_trained_base_fixtures as trained  # noqa: E402

transformers.logging.set_verbosity_error()


def make_base(folder):
    config = transformers.GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=4,
                                     bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0,
                                     attn_pdrop=0.0)
    torch.manual_seed(7)
    model = transformers.GPT2LMHeadModel(config)
    with torch.no_grad():  # biases and norms away from their init, so that each is exercised
        for name, p in model.named_parameters():
            if name.endswith("bias") or ".ln_" in name:
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(folder)
    for extra in ("generation_config.json",):
        path = os.path.join(folder, extra)
        if os.path.exists(path):
            os.remove(path)


def lora_model(base_folder, extra):
    model = transformers.AutoModelForCausalLM.from_pretrained(base_folder, attn_implementation="eager")
    config = peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["c_attn", "c_proj", "c_fc"],
                             fan_in_fan_out=True, task_type="CAUSAL_LM", **extra)
    torch.manual_seed(1234)
    model = peft.get_peft_model(model, config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(0.05 * torch.randn_like(p))
    return model


if __name__ == "__main__":
    data = sys.argv[1] if len(sys.argv) > 1 else "tests/models/data"
    make_base(os.path.join(data, "gpt2"))
    trained.lora_model = lora_model
    trained.make(data, "gpt2_lora", "gpt2", dict(bias="none"))
