"""Produces the expected numbers of ZeroClipping.StageZeroClipsAsDeepSpeedsStageZeroEngine
(tests/zero/test_zero_behaviour.cpp) with DeepSpeed itself: two gloo ranks hold the test's
gradients (params_of(4, 97): per layer l a tensor of 97 + l elements and one of 7, every element
of layer l equal to (a·(l+1) + b·rank)/1024), average them as DeepSpeed's stage-0 engine does
(allreduce, then times 1/2) and clip them with the clip_grad_norm_ its stage-0 engine calls, for
each case (gradient_clipping, a, b). Prints, per case and tensor, the clipped gradient's fp32
bits, which the test pastes. Not CI: needs the peers venv.

usage: python bench/zero/deepspeed_clip_reference.py
"""
import os
import socket
import struct
import subprocess
import sys

LAYERS, PER_LAYER, WORLD = 4, 97, 2
# (gradient_clipping, a, b): the first is clipped alike by fp32 and double arithmetic, the others
# are cases where the fp32 arithmetic of DeepSpeed's clip_grad_norm_ gives another last bit; in
# all four torch's pow(0.5) equals sqrtf.
CASES = [(0.05, 3, 1), (0.03, 4, 1), (0.05, 5, 1), (0.05, 8, 2)]


def grad_of(a, b, layer, rank):
    # Small multiples of 2^-10: every square and every tensor's sum of squares is exact in fp32,
    # so the per-tensor norms do not depend on torch's summation order.
    return (a * (layer + 1) + b * rank) / 1024.0


def tensors(a, b, rank):
    import torch

    out = []
    for layer in range(LAYERS):
        for n in (PER_LAYER + layer, 7):
            out.append(torch.full((n,), grad_of(a, b, layer, rank), dtype=torch.float32))
    return out


def clipped_bits(clip, a, b, rank):
    import torch
    import deepspeed.comm as dist
    from deepspeed.runtime.utils import clip_grad_norm_

    params = []
    for g in tensors(a, b, rank):
        p = torch.nn.Parameter(torch.zeros_like(g))
        dist.all_reduce(g)  # the stage-0 engine's allreduce_bucket: sum, then times 1/world
        p.grad = g.mul_(1.0 / WORLD)
        params.append(p)
    clip_grad_norm_(params, max_norm=clip)
    assert all(bool((p.grad == p.grad[0]).all()) for p in params)
    return [struct.unpack("<I", struct.pack("<f", float(p.grad[0])))[0] for p in params]


def rank_main():
    import deepspeed
    import deepspeed.comm as dist

    dist.init_distributed(dist_backend="gloo")
    rows = [(case, clipped_bits(*case, dist.get_rank())) for case in CASES]
    if dist.get_rank() == 0:
        print(f"// by bench/zero/deepspeed_clip_reference.py, DeepSpeed {deepspeed.__version__}")
        for (clip, a, b), bits in rows:
            print(f"    {{{clip}, {a}, {b}, {{" + ", ".join(f"0x{x:08x}u" for x in bits) + "}},")


def main():
    if os.environ.get("RANK") is not None:
        return rank_main()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    procs = [subprocess.Popen([sys.executable, __file__],
                              env=dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(WORLD),
                                       MASTER_ADDR="127.0.0.1", MASTER_PORT=port, DS_ACCELERATOR="cpu"))
             for r in range(WORLD)]
    sys.exit(max(p.wait() for p in procs))


if __name__ == "__main__":
    main()
