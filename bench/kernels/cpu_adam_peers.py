"""Times the CPU AdamW steps a dsx user would otherwise pick, on the same sizes and threads as
bench_cpu_adam: DeepSpeed's DeepSpeedCPUAdam (its cpu_adam op is built on first use) and
torch.optim.AdamW with foreach=True and fused=True. "bf16" adds the 16-bit working copy the
way those users get it: the step, then p16.copy_(p). Writes JSON for bench_cpu_adam --peers.

usage: python cpu_adam_peers.py --sizes 16777216,67108864 --threads 2 --reps 7 --out peers.json
"""
import argparse
import json
import os
import sys
import time


def best_ms(fn, reps):
    """Best of `reps` timed runs after two warm-ups, as bench_cpu_adam measures dsx."""
    fn()
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="16777216,67108864")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # before torch / the DeepSpeed op load OpenMP
    import torch

    torch.set_num_threads(args.threads)
    try:
        from deepspeed.ops.adam import DeepSpeedCPUAdam
    except Exception as e:  # the benchmark still reports the torch peers
        print(f"cpu_adam_peers: DeepSpeedCPUAdam unavailable: {e}", file=sys.stderr)
        DeepSpeedCPUAdam = None

    results = []
    for n in [int(s) for s in args.sizes.split(",")]:
        p = torch.randn(n) * 0.1
        g = torch.randn(n) * 1e-3
        p16 = torch.empty(n, dtype=torch.bfloat16)
        makers = {
            "torch_foreach": lambda q: torch.optim.AdamW([q], lr=1e-3, weight_decay=0.01, foreach=True),
            "torch_fused": lambda q: torch.optim.AdamW([q], lr=1e-3, weight_decay=0.01, fused=True),
        }
        if DeepSpeedCPUAdam is not None:
            makers["deepspeed_cpu_adam"] = lambda q: DeepSpeedCPUAdam([q], lr=1e-3, weight_decay=0.01, adamw_mode=True)
        for name, make in makers.items():
            q = torch.nn.Parameter(p.clone())
            q.grad = g.clone()
            try:
                opt = make(q)
                for copy in ("none", "bf16"):
                    if copy == "none":
                        ms = best_ms(opt.step, args.reps)
                    else:
                        ms = best_ms(lambda: (opt.step(), p16.copy_(q.data)), args.reps)
                    results.append({"n": n, "copy": copy, "peer": name, "ms": ms})
                    print(f"{name} n={n} copy={copy}: {ms:.1f} ms", file=sys.stderr)
            except Exception as e:
                print(f"cpu_adam_peers: {name} failed: {e}", file=sys.stderr)
            del q
    with open(args.out, "w") as f:
        json.dump({"threads": args.threads, "torch": torch.__version__, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
