"""Runs the same Adam steps through dsx's CPU kernel (ctypes shim) and DeepSpeed's
DeepSpeedCPUAdam, and through torch.optim.Adam/AdamW as a second opinion, for both weight-decay
modes and bias correction on/off, and prints the largest differences. A compatibility check
with the real DeepSpeed, not a CI test (CI has no peers venv).

usage: python check_against_deepspeed.py --dsx-lib build/bench/kernels/libdsx_bench_adam_shim.so
"""
import argparse
import ctypes
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsx-lib", required=True)
    ap.add_argument("--n", type=int, default=100003)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    import torch
    from deepspeed.ops.adam import DeepSpeedCPUAdam

    dsx = ctypes.CDLL(args.dsx_lib).dsx_bench_adamw_step
    f = ctypes.c_float
    lr, b1, b2, eps, wd = 1e-3, 0.9, 0.999, 1e-8, 0.1
    torch.manual_seed(0)
    p0 = torch.randn(args.n)
    grads = [torch.randn(args.n) * 0.1 for _ in range(args.steps)]
    worst = 0.0
    print("| adam_w_mode | bias_correction | max abs diff dsx vs DeepSpeed | vs torch | param scale |")
    print("|---|---|---|---|---|")
    for adamw in (True, False):
        for bias in (True, False):
            p, m, v = p0.clone(), torch.zeros(args.n), torch.zeros(args.n)
            q = torch.nn.Parameter(p0.clone())
            ds = DeepSpeedCPUAdam([q], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, adamw_mode=adamw,
                                  bias_correction=bias)
            t = torch.nn.Parameter(p0.clone())
            cls = torch.optim.AdamW if adamw else torch.optim.Adam
            ref = cls([t], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
            for step, g in enumerate(grads, start=1):
                rc = dsx(ctypes.c_void_p(p.data_ptr()), ctypes.c_void_p(g.data_ptr()), ctypes.c_void_p(m.data_ptr()),
                         ctypes.c_void_p(v.data_ptr()), ctypes.c_size_t(args.n), ctypes.c_int64(step), f(lr), f(b1),
                         f(b2), f(eps), f(wd), int(adamw), int(bias), None)
                assert rc == 0
                q.grad = g.clone()
                ds.step()
                t.grad = g.clone()
                ref.step()
            d_ds = (p - q.data).abs().max().item()
            # torch always corrects the bias: without it there is nothing to compare with.
            d_torch = (p - t.data).abs().max().item() if bias else float("nan")
            worst = max(worst, d_ds)
            print(f"| {adamw} | {bias} | {d_ds:.3g} | {d_torch:.3g} | {p.abs().max().item():.3g} |")
    # Both run the same fp32 formula in a different operation order: a few ulp of |p| <= ~5.
    ok = worst < 1e-5
    print(f"\n{'agree' if ok else 'DIFFER'}: largest difference from DeepSpeedCPUAdam {worst:.3g}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
