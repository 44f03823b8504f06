"""Times what a DeepSpeed user's checkpoint costs, on the same tensors as bench_checkpoint:
safetensors.torch.save_file and torch.save (DeepSpeed's .pt format), each followed by fsync (a
save that a crash cannot undo), and their loads. Writes JSON for bench_checkpoint --peers.

usage: python checkpoint_peers.py --ranks 2 --mib 128 --reps 3 --out peers.json [--dir DIR]
"""
import argparse
import json
import os
import shutil
import tempfile
import time


def best_seconds(fn, reps, prepare=lambda: None):
    """Best wall and best CPU seconds of `reps` timed runs after a warm-up; `prepare` runs
    untimed before each. On a shared machine the CPU seconds leave out the time spent waiting
    for a core."""
    prepare()
    fn()
    best, best_cpu = float("inf"), float("inf")
    for _ in range(reps):
        prepare()
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return best, best_cpu


def fsync_file(path):
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--mib", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import torch
    from safetensors.torch import load_file, save_file

    torch.set_num_threads(1)
    work = tempfile.mkdtemp(prefix="dsx-bench-peers-", dir=args.dir)
    numel = args.mib << 18
    parts = [(torch.arange(numel, dtype=torch.float32) % 1009) * 0.001 + r for r in range(args.ranks)]
    st = [os.path.join(work, f"rank{r}.safetensors") for r in range(args.ranks)]
    pt = [os.path.join(work, f"rank{r}.pt") for r in range(args.ranks)]

    def st_save():
        for r in range(args.ranks):
            save_file({"master.0": parts[r]}, st[r], metadata={"step": "1"})
            fsync_file(st[r])

    def pt_save():
        for r in range(args.ranks):
            torch.save({"single_partition_of_fp32_groups": [parts[r]], "step": 1}, pt[r])
            fsync_file(pt[r])

    def remove(paths):  # each save writes new files, as dsx's saves write new tags
        return lambda: [os.unlink(p) for p in paths if os.path.exists(p)]

    # The engine's resume: each rank's tensor copied into a buffer it already holds (touched).
    into = torch.zeros(numel, dtype=torch.float32)

    def st_load_copy():
        for p in st:
            into.copy_(load_file(p)["master.0"])

    seconds = {
        "safetensors_save": best_seconds(st_save, args.reps, remove(st)),
        "torch_save": best_seconds(pt_save, args.reps, remove(pt)),
        "safetensors_load": best_seconds(lambda: [load_file(p)["master.0"].sum() for p in st], args.reps),
        "safetensors_load_copy": best_seconds(st_load_copy, args.reps),
        "torch_load": best_seconds(
            lambda: [torch.load(p, weights_only=True)["single_partition_of_fp32_groups"][0].sum() for p in pt],
            args.reps),
    }
    shutil.rmtree(work)
    with open(args.out, "w") as f:
        json.dump({"ranks": args.ranks, "mib": args.mib, "seconds": {k: v[0] for k, v in seconds.items()},
                   "cpu_seconds": {k: v[1] for k, v in seconds.items()}}, f)


if __name__ == "__main__":
    main()
