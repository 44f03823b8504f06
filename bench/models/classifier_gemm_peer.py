"""torch.mm for the three products of bench_classifier_gemm (GPT-2's tied classifier at 1024
tokens, 384 channels, 50304 vocabulary), best of --repeat, one JSON line each.
usage: python classifier_gemm_peer.py --threads N [--repeat 5]
"""
import argparse
import json
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    N, C, V = 1024, 384, 50304
    x, w, g = torch.randn(N, C), torch.randn(V, C), torch.randn(N, V)
    products = [("logits = x @ wte^T", lambda: x @ w.t(), N * V * C),
                ("dx = dlogits @ wte", lambda: g @ w, N * C * V),
                ("dwte = dlogits^T @ x", lambda: g.t() @ x, V * C * N)]
    for name, fn, macs in products:
        best = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        print(json.dumps({"impl": f"torch {torch.__version__}", "product": name, "s": round(best, 5),
                          "gflops": round(2 * macs / best / 1e9, 1), "threads": torch.get_num_threads()}),
              flush=True)


if __name__ == "__main__":
    main()
