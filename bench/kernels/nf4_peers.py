"""Peers of bench_nf4_linear: bitsandbytes' 4-bit linear (matmul_4bit, NF4 with double
quantisation, bf16 compute) and torch's dense bf16 linear on the same shapes, on the CPU, best of
--reps after a warm-up. Writes {"threads": T, "rows": [{rows, cols, tokens, bnb_ms, torch_bf16_ms}]}.
"""
import argparse
import json

import bitsandbytes as bnb
import bitsandbytes.functional as F
import torch
from peer_timing import best_ms


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", required=True, help="ROWSxCOLS,... (out x in)")
    p.add_argument("--tokens", required=True, help="comma-separated token counts")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    rows_out = []
    for shape in a.shapes.split(","):
        rows, cols = (int(v) for v in shape.split("x"))
        w = (torch.randn(rows, cols) * 0.02).bfloat16()
        q, state = F.quantize_4bit(w, blocksize=64, quant_type="nf4", compress_statistics=True)
        for tokens in (int(t) for t in a.tokens.split(",")):
            x = torch.randn(tokens, cols).bfloat16()
            with torch.no_grad():
                bnb_ms = best_ms(lambda: bnb.matmul_4bit(x, q.t(), quant_state=state), a.reps)
                dense_ms = best_ms(lambda: torch.nn.functional.linear(x, w), a.reps)
            rows_out.append(dict(rows=rows, cols=cols, tokens=tokens, bnb_ms=bnb_ms,
                                 torch_bf16_ms=dense_ms))
    with open(a.out, "w") as f:
        json.dump({"threads": a.threads, "bitsandbytes": bnb.__version__,
                   "torch": torch.__version__, "rows": rows_out}, f)


if __name__ == "__main__":
    main()
