"""Writes tests/models/data/llama_bnb_nf4/: the tiny Llama of data/llama_bf16 loaded by
transformers with bitsandbytes 4-bit quantisation (NF4, double quantisation, bf16 compute) and
saved again, so its linears are bnb's quant-state tensors; and llama_bnb_nf4_dequant.safetensors:
bnb's dequantisation of every quantised weight, which dsx's reader must equal bit for bit.

The dequantisation is bnb's device-independent kernel (backends/default, the CUDA kernel's
arithmetic): bnb 0.50.2's native CPU dequantize_4bit gives wrong values for weights whose rows
are shorter than a block (e.g. [32, 32]: element 64 scaled by block 0's absmax).
CI has no torch: run this by hand and commit the outputs.

    python tests/models/compat/make_bnb_nf4_fixture.py   (torch, transformers, bitsandbytes >= 0.47)
"""
import os

import bitsandbytes
import bitsandbytes.functional as F
from bitsandbytes.backends.default.ops import _dequantize_4bit_compute
import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, BitsAndBytesConfig

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")


def main():
    source = os.path.join(DATA, "llama_bf16")
    target = os.path.join(DATA, "llama_bnb_nf4")
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                               bnb_4bit_use_double_quant=True,
                               bnb_4bit_compute_dtype=torch.bfloat16)
    model = AutoModelForCausalLM.from_pretrained(source, quantization_config=quant,
                                                 device_map="cpu", dtype=torch.bfloat16)
    model.save_pretrained(target)
    dequant = {}
    for name, module in model.named_modules():
        if isinstance(module, bitsandbytes.nn.Linear4bit):
            w, state = module.weight, module.weight.quant_state
            absmax = F.dequantize_blockwise(state.absmax, state.state2) + state.offset
            code = F.get_4bit_type("nf4", device="cpu")
            dequant[name + ".weight"] = _dequantize_4bit_compute(
                w.data.view(-1), absmax.float(), code, state.blocksize, state.shape, state.dtype
            ).contiguous()
    save_file(dequant, os.path.join(DATA, "llama_bnb_nf4_dequant.safetensors"),
              metadata={"bitsandbytes": bitsandbytes.__version__})
    print("wrote", target, "and", len(dequant), "dequantised weights")


if __name__ == "__main__":
    main()
