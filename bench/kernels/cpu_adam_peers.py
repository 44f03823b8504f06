"""Times one CPU AdamW step of dsx and of the optimizers a dsx user would otherwise pick, on the
same sizes and threads, in one process and round-robin (one step of each in turn), so all of
them see the same machine load: dsx (through its C shim, libdsx_bench_adam_shim.so, via
ctypes), DeepSpeed's DeepSpeedCPUAdam (its cpu_adam op is built on first use), and
torch.optim.AdamW with foreach=True and fused=True. "bf16" adds the 16-bit working copy: dsx
writes it in the same pass; the peers do what their users do, the step then p16.copy_(p).
Each figure is the best of --reps steps. Writes JSON for bench_cpu_adam --peers.

usage: python cpu_adam_peers.py --dsx-lib build/bench/kernels/libdsx_bench_adam_shim.so \
           --sizes 16777216,67108864 --threads 2 --reps 9 --out peers.json
"""
import argparse
import ctypes
import json
import os
import sys
import time

LR, BETA1, BETA2, EPS, WD = 1e-3, 0.9, 0.999, 1e-8, 0.01


def make_runners(torch, n, dsx, DeepSpeedCPUAdam):
    """name -> (step function without copy, step function with the bf16 copy)."""
    p0 = torch.randn(n) * 0.1
    g0 = torch.randn(n) * 1e-3
    runners = {}

    if dsx is not None:
        p, g, m, v = p0.clone(), g0.clone(), torch.zeros(n), torch.zeros(n)
        p16 = torch.empty(n, dtype=torch.bfloat16)
        step = [0]
        f = ctypes.c_float

        def dsx_step(copy):
            step[0] += 1
            out = ctypes.c_void_p(p16.data_ptr()) if copy else None
            rc = dsx(ctypes.c_void_p(p.data_ptr()), ctypes.c_void_p(g.data_ptr()), ctypes.c_void_p(m.data_ptr()),
                     ctypes.c_void_p(v.data_ptr()), ctypes.c_size_t(n), ctypes.c_int64(step[0]), f(LR), f(BETA1),
                     f(BETA2), f(EPS), f(WD), 1, 1, out)
            assert rc == 0

        runners["dsx"] = (lambda: dsx_step(False), lambda: dsx_step(True))

    makers = {
        "torch_foreach": lambda q: torch.optim.AdamW([q], lr=LR, betas=(BETA1, BETA2), eps=EPS, weight_decay=WD,
                                                     foreach=True),
        "torch_fused": lambda q: torch.optim.AdamW([q], lr=LR, betas=(BETA1, BETA2), eps=EPS, weight_decay=WD,
                                                   fused=True),
    }
    if DeepSpeedCPUAdam is not None:
        makers["deepspeed_cpu_adam"] = lambda q: DeepSpeedCPUAdam([q], lr=LR, betas=(BETA1, BETA2), eps=EPS,
                                                                  weight_decay=WD, adamw_mode=True)
    for name, make in makers.items():
        try:
            q = torch.nn.Parameter(p0.clone())
            q.grad = g0.clone()
            opt = make(q)
            q16 = torch.empty(n, dtype=torch.bfloat16)
            runners[name] = (opt.step, (lambda o=opt, a=q, b=q16: (o.step(), b.copy_(a.data))))
        except Exception as e:  # report the others
            print(f"cpu_adam_peers: {name} unavailable: {e}", file=sys.stderr)
    return runners


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsx-lib", required=True)
    ap.add_argument("--sizes", default="16777216,67108864")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # before torch / the DeepSpeed op load OpenMP
    import torch

    torch.set_num_threads(args.threads)
    try:
        from deepspeed.ops.adam import DeepSpeedCPUAdam
    except Exception as e:
        print(f"cpu_adam_peers: DeepSpeedCPUAdam unavailable: {e}", file=sys.stderr)
        DeepSpeedCPUAdam = None
    dsx = ctypes.CDLL(args.dsx_lib).dsx_bench_adamw_step
    dsx.restype = ctypes.c_int

    results = []
    for n in [int(s) for s in args.sizes.split(",")]:
        runners = make_runners(torch, n, dsx, DeepSpeedCPUAdam)
        for copy_index, copy in enumerate(("none", "bf16")):
            best = {name: float("inf") for name in runners}
            for name, fns in runners.items():  # two warm-up steps each
                fns[copy_index]()
                fns[copy_index]()
            for _ in range(args.reps):
                for name, fns in runners.items():
                    t0 = time.perf_counter()
                    fns[copy_index]()
                    best[name] = min(best[name], (time.perf_counter() - t0) * 1e3)
            for name, ms in best.items():
                results.append({"n": n, "copy": copy, "peer": name, "ms": ms})
                print(f"{name} n={n} copy={copy}: {ms:.1f} ms", file=sys.stderr)
        del runners
    with open(args.out, "w") as f:
        json.dump({"threads": args.threads, "torch": torch.__version__, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
