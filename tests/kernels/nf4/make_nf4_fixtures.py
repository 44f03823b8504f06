"""Writes nf4_bnb.safetensors: inputs and bitsandbytes' own quantize_4bit / dequantize_4bit
outputs (NF4, blocksize 64, with and without double quantisation), which test_kernels_nf4 holds
dsx's NF4 kernels to, bit for bit. CI has no torch: run this by hand and commit the output.

    python tests/kernels/nf4/make_nf4_fixtures.py   (needs torch, bitsandbytes >= 0.47, safetensors)
"""
import os

import bitsandbytes
import bitsandbytes.functional as F
import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))


def awkward_input(shape, dtype, seed):
    """Normal weights with the cases the rounding rule must get right: an all-zero block, an
    outlier, values exactly on code midpoints, and a partial last block (numel % 64 != 0)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * 0.02
    flat = x.view(-1)
    flat[64:128] = 0.0                      # an all-zero block
    flat[200] = 3.0                         # an outlier: its block is almost all code 7
    code = F.get_4bit_type("nf4", device="cpu")
    mids = (code[:-1] + code[1:]) / 2
    flat[256:256 + 15] = mids * 0.5         # block 4's absmax is 0.5: exact midpoint ties
    flat[256 + 15] = 0.5
    return x.to(dtype)


def quantize_case(out, name, x, double_quant, dequant_tags=("f32", "bf16", "f16")):
    q, st = F.quantize_4bit(x, blocksize=64, quant_type="nf4", compress_statistics=double_quant)
    out[f"{name}.input"] = x.contiguous()
    out[f"{name}.packed"] = q.view(-1).contiguous()
    out[f"{name}.absmax"] = st.absmax.contiguous()
    dtypes = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
    for tag in dequant_tags:
        st.dtype = dtypes[tag]
        out[f"{name}.dequant_{tag}"] = F.dequantize_4bit(q, st).contiguous()
    if double_quant:
        out[f"{name}.nested_absmax"] = st.state2.absmax.contiguous()
        out[f"{name}.nested_quant_map"] = st.state2.code.contiguous()
        out[f"{name}.nested_offset"] = st.offset.reshape(1).float()


def main():
    out = {}
    quantize_case(out, "f32", awkward_input((40, 70), torch.float32, 1), False)
    quantize_case(out, "bf16", awkward_input((33, 64), torch.bfloat16, 2), False)
    quantize_case(out, "f16", awkward_input((7, 50), torch.float16, 3), False)
    # 65 elements: an odd count, so the last byte's low nibble is padding.
    quantize_case(out, "odd", torch.randn((5, 13), generator=torch.Generator().manual_seed(5)), False)
    # 264 blocks of 64: the absmax is double-quantised in one full and one partial block of 256.
    quantize_case(out, "dq", awkward_input((66, 256), torch.bfloat16, 4), True, ("bf16",))
    out["dynamic_map"] = F.create_dynamic_map().float()
    out["nf4_code"] = F.get_4bit_type("nf4", device="cpu").float()
    path = os.path.join(HERE, "nf4_bnb.safetensors")
    save_file(out, path, metadata={"bitsandbytes": bitsandbytes.__version__,
                                   "torch": torch.__version__})
    print("wrote", path)


if __name__ == "__main__":
    main()
