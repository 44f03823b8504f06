"""Writes the fixtures of QLoRA's sample and merged export (tests/engine/test_qlora_cli.cpp):
- tests/models/data/llama_bytes_bnb_nf4/: a tiny byte-level Llama (vocabulary 256, so the built-in
  addition task trains it) loaded by transformers with bitsandbytes 4-bit (NF4, double
  quantisation, bf16 compute) and saved again;
- tests/models/data/llama_bytes_qlora/: a PEFT LoRA adapter on it (r=4, alpha=8, all-linear,
  random A and B), adapter_config.json and adapter_model.safetensors as PEFT saves them, and
  merged.safetensors: what PEFT's merge_and_unload computes for some of its 4-bit linears before
  it quantises them again (dequantize_bnb_weight(W) + get_delta_weight), in float32.
Rows are 64 or 128 long (no shorter than a block): bnb 0.50.2's native CPU dequantize_4bit is
wrong for rows shorter than a block (see make_bnb_nf4_fixture.py); the script checks that its
dequantisation equals bnb's device-independent kernel before trusting it.
CI has no torch: run this by hand and commit the outputs.

    python tests/models/compat/make_qlora_merge_fixture.py   (torch, transformers, bitsandbytes, peft)
"""
import os
import tempfile

import bitsandbytes
import bitsandbytes.functional as F
import peft
import torch
from bitsandbytes.backends.default.ops import _dequantize_4bit_compute
from peft import LoraConfig, get_peft_model
from peft.utils.integrations import dequantize_bnb_weight
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
MERGED = ["model.layers.0.self_attn.q_proj", "model.layers.1.self_attn.v_proj", "model.layers.1.mlp.down_proj"]


def bf16_folder(path):
    torch.manual_seed(5)
    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                         max_position_embeddings=64, tie_word_embeddings=False, bos_token_id=None,
                         eos_token_id=None)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(path)


def check_dequantisation(weight):
    state = weight.quant_state
    absmax = F.dequantize_blockwise(state.absmax, state.state2) + state.offset
    reference = _dequantize_4bit_compute(weight.data.view(-1), absmax.float(), F.get_4bit_type("nf4", device="cpu"),
                                         state.blocksize, state.shape, state.dtype)
    got = dequantize_bnb_weight(weight, state=state)
    assert torch.equal(got, reference), "bnb's CPU dequantisation differs from its reference kernel"
    return got


def main():
    base_dir = os.path.join(DATA, "llama_bytes_bnb_nf4")
    adapter_dir = os.path.join(DATA, "llama_bytes_qlora")
    with tempfile.TemporaryDirectory() as tmp:
        bf16_folder(tmp)
        quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                   bnb_4bit_compute_dtype=torch.bfloat16)
        model = AutoModelForCausalLM.from_pretrained(tmp, quantization_config=quant, device_map="cpu",
                                                     dtype=torch.bfloat16)
    model.save_pretrained(base_dir)
    model.name_or_path = "tests/models/data/llama_bytes_bnb_nf4"  # what adapter_config.json names
    torch.manual_seed(6)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False,
                      task_type="CAUSAL_LM")
    peft_model = get_peft_model(model, lora)
    peft_model.save_pretrained(adapter_dir)
    os.remove(os.path.join(adapter_dir, "README.md"))  # PEFT's model card template
    merged = {}
    for name, module in peft_model.base_model.model.named_modules():
        if name in MERGED:
            weight = module.get_base_layer().weight
            merged[name + ".weight"] = (check_dequantisation(weight) + module.get_delta_weight("default")).float()
    assert len(merged) == len(MERGED)
    save_file(merged, os.path.join(adapter_dir, "merged.safetensors"),
              metadata={"peft": peft.__version__, "bitsandbytes": bitsandbytes.__version__})
    print("wrote", base_dir, "and", adapter_dir)


if __name__ == "__main__":
    main()
