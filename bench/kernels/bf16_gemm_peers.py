"""Peer of bench_bf16_gemm: torch's bf16 matmul (oneDNN/MKL inside torch) on the GPT-2 products
of one micro-batch, on the CPU, best of --reps after a warm-up. Writes
{"threads": T, "torch": version, "rows": [{key, ms}]} with the keys bench_bf16_gemm prints.
"""
import argparse
import json

import torch
from peer_timing import best_ms


def linear_products(name, tokens, oc, c):
    """(key, a, b) per product; a and b are views shaped like the model's operands."""
    inp = torch.randn(tokens, c).bfloat16()
    w = torch.randn(oc, c).bfloat16()
    dout = torch.randn(tokens, oc).bfloat16()
    return [(name + " fwd", inp, w.t()), (name + " dinp", dout, w), (name + " dW", dout.t(), inp)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=1024)
    p.add_argument("--channels", type=int, default=384)
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    n, c = a.tokens, a.channels
    products = (linear_products("qkv", n, 3 * c, c) + linear_products("attn proj", n, c, c)
                + linear_products("fc", n, 4 * c, c) + linear_products("fc proj", n, c, 4 * c)
                + linear_products("classifier", n, a.vocab, c))
    rows = []
    with torch.no_grad():
        for key, x, y in products:
            rows.append(dict(key=key, ms=best_ms(lambda: torch.matmul(x, y), a.reps)))
    with open(a.out, "w") as f:
        json.dump({"threads": a.threads, "torch": torch.__version__, "rows": rows}, f)


if __name__ == "__main__":
    main()
