"""The torch.distributed peer of `dsx bench comm`: gloo allreduce (float32 sum, in place) per
size, with the same sizes, warm-up and iteration counts, on 2 local processes over loopback.
Prints "bytes microseconds" per line (the slowest rank's average).
Usage: python gloo_allreduce.py MINBYTES MAXBYTES ITERS WARMUP PORT"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, world, min_bytes, max_bytes, iters, warmup, port):
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    bytes_ = min_bytes
    while bytes_ <= max_bytes:
        x = torch.ones(bytes_ // 4, dtype=torch.float32)
        for _ in range(warmup):
            dist.all_reduce(x)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(x)
        t = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        if rank == 0:
            print(f"{bytes_} {t.item() * 1e6:.3f}", flush=True)
        bytes_ *= 2
    dist.destroy_process_group()


if __name__ == "__main__":
    min_bytes, max_bytes, iters, warmup, port = (int(a) for a in sys.argv[1:6])
    mp.spawn(rank_main, args=(2, min_bytes, max_bytes, iters, warmup, port), nprocs=2)
