"""Trains GPT-2 tiny (2 layers, 64 channels, 4 heads, byte vocabulary) on 2 ranks with dsx and with
DeepSpeed itself, from the same initial weights and on the same batches, at each ZeRO stage, and
prints how far dsx's per-step losses and final weights are from DeepSpeed's, and how far
DeepSpeed's own stage 0 is from its ZeRO stages (the noise floor: fp32 roundings that differ by a
last bit grow through Adam). DeepSpeed's AdamW is torch's (`torch_adam`) or, with --adam fused, its
fused CPU op (a JIT build on first use), lr 1e-3; gradient_clipping 0.3 binds at every step. Not CI: it needs the peers venv
(bench/peers/venv.sh) and a built dsx.

usage: python bench/zero/deepspeed_parity.py --dsx build/dsx [--stages 0 1 2 3] [--steps 30]
                                              [--clip 0.3] [--dtype fp32|bf16] [--keep DIR]
"""
import argparse
import json
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile

SEQ, BATCH, WORLD, SEED = 64, 4, 2, 1


def mt19937_64(seed):
    """std::mt19937_64, whose draws order dsx's shuffled samples (models/data/permutation.h)."""
    m = (1 << 64) - 1
    state = [seed & m]
    for i in range(1, 312):
        state.append((6364136223846793005 * (state[-1] ^ (state[-1] >> 62)) + i) & m)
    index = 312
    while True:
        if index == 312:
            for i in range(312):
                x = (state[i] & 0xFFFFFFFF80000000) | (state[(i + 1) % 312] & 0x7FFFFFFF)
                state[i] = state[(i + 156) % 312] ^ (x >> 1) ^ (0xB5026F5AA96619E9 if x & 1 else 0)
            index = 0
        y = state[index]
        index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        yield y & m


def sample_order(samples, seed):
    """dsx's order of one shard's samples in epoch 0: seeded_permutation(n, mix(mix(seed, 0), 1))."""
    m = (1 << 64) - 1

    def mix(a, b):
        return ((a * 0x9E3779B97F4A7C15) & m) ^ ((b + 0x632BE59BD9B4E019) & m)

    order, rng = list(range(samples)), mt19937_64(mix(mix(seed, 0), 1))
    for i in range(samples, 1, -1):
        j = next(rng) % i
        order[i - 1], order[j] = order[j], order[i - 1]
    return order


def text():
    """64 KiB of seeded sentences: the same data on every run, whatever the repository holds."""
    words = ("the rank sends its gradient bucket to the ring and waits for the sum while backward goes on "
             "partition optimizer state parameters gather scatter reduce step loss scale norm clip").split()
    rng, out = random.Random(0), []
    while sum(len(w) + 1 for w in out) < 1 << 16:
        out += [rng.choice(words) for _ in range(rng.randint(4, 12))] + [".\n"]
    return " ".join(out)


def make_inputs(work):
    """A GPT-2 tiny folder (transformers' init, seed 0) and one llm.c shard of text()'s bytes."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=256, n_positions=SEQ, n_embd=64, n_layer=2, n_head=4, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
                        tie_word_embeddings=True)
    GPT2LMHeadModel(config).save_pretrained(os.path.join(work, "model"))
    data = text().encode()
    os.makedirs(os.path.join(work, "data"))
    header = struct.pack("<256i", 20240520, 1, len(data), *([0] * 253))
    with open(os.path.join(work, "data", "train_000000.bin"), "wb") as f:
        f.write(header + struct.pack(f"<{len(data)}H", *data))
    with open(os.path.join(work, "data", "tokenize.json"), "w") as f:
        json.dump({"vocab_size": 256}, f)
    return data


def ds_config(stage, clip, dtype, work, adam):
    return {"train_micro_batch_size_per_gpu": BATCH, "gradient_accumulation_steps": 1,
            "gradient_clipping": clip, "steps_per_print": 1000000,
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.0,
                                                                   "torch_adam": adam == "torch"}},
            "bf16": {"enabled": dtype == "bf16"},
            "zero_optimization": {"stage": stage},
            "csv_monitor": {"enabled": True, "output_path": work, "job_name": "csv"}}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_dsx(args, work, stage):
    run = os.path.join(work, f"dsx{stage}")
    os.makedirs(run)
    cfg = os.path.join(run, "ds.json")
    with open(cfg, "w") as f:
        json.dump(ds_config(stage, args.clip, args.dtype, run, args.adam), f)
    env = dict(os.environ, FI_TCP_IFACE="lo", FI_SOCKETS_IFACE="lo", OMP_NUM_THREADS="1")
    subprocess.run([args.dsx, "launch", "--num_gpus", str(WORLD), "--master_port", str(free_port()), args.dsx,
                    "train", "--deepspeed_config", cfg, "--model", os.path.join(work, "model"), "--data",
                    "shards:" + os.path.join(work, "data", "train_*.bin"), "--seq_len", str(SEQ), "--steps",
                    str(args.steps), "--seed", str(SEED), "--eval_interval", "0", "--samples", "0",
                    "--progress", "plain", "--save", os.path.join(run, "ck")],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run([args.dsx, "export", os.path.join(run, "ck"), "--out", os.path.join(run, "hf")], check=True,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(run, "csv", "Train_Samples_train_loss.csv")) as f:
        losses = [float(line.split(",")[1]) for line in f.read().splitlines()[1:]]
    from safetensors.torch import load_file
    return losses, load_file(os.path.join(run, "hf", "model.safetensors"))


def ds_rank(args):
    """One DeepSpeed rank (started by run_deepspeed): trains and writes its losses and weights."""
    import torch
    import deepspeed
    from transformers import GPT2LMHeadModel

    torch.set_num_threads(1)
    stage0_norms = []  # the stage-0 engine keeps no norm: record what its clip_grad_norm_ returns
    import deepspeed.runtime.engine as ds_engine
    clip = ds_engine.clip_grad_norm_
    ds_engine.clip_grad_norm_ = lambda *a, **k: stage0_norms.append(float(clip(*a, **k))) or stage0_norms[-1]
    deepspeed.init_distributed(dist_backend="gloo")
    rank = int(os.environ["RANK"])
    work, stage = args.ds_work, args.ds_stage
    model = GPT2LMHeadModel.from_pretrained(os.path.join(work, "model"), attn_implementation="eager")
    cfg = ds_config(stage, args.clip, args.dtype, os.path.join(work, f"ds{stage}"), args.adam)
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
    tokens = open(os.path.join(work, "data", "train_000000.bin"), "rb").read()[1024:]
    tokens = torch.tensor(struct.unpack(f"<{len(tokens) // 2}H", tokens), dtype=torch.long)
    bt = BATCH * SEQ
    order = sample_order((len(tokens) - 1) // (WORLD * bt), SEED)
    losses, norms = [], []
    for step in range(args.steps):
        start = (order[step] * WORLD + rank) * bt
        x = tokens[start:start + bt].view(BATCH, SEQ)
        y = tokens[start + 1:start + bt + 1].view(BATCH, SEQ)
        logits = engine(input_ids=x).logits.float()
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.reshape(-1))
        engine.backward(loss)
        engine.step()
        mean = loss.detach().clone()
        torch.distributed.all_reduce(mean)
        losses.append(mean.item() / WORLD)
        norm = stage0_norms[-1] if stage0_norms else engine.get_global_grad_norm()  # bf16: FP16_Optimizer's
        norms.append(float(norm))
    params = list(engine.module.named_parameters())
    with deepspeed.zero.GatheredParameters([p for _, p in params], enabled=stage == 3):
        state = {name: p.detach().float().clone() for name, p in params}
    if rank == 0:
        torch.save({"losses": losses, "norms": norms, "weights": state},
                   os.path.join(work, f"ds{stage}", "result.pt"))


def run_deepspeed(args, work, stage):
    import torch

    os.makedirs(os.path.join(work, f"ds{stage}"))
    port = str(free_port())
    procs = []
    for rank in range(WORLD):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, __file__, "--ds-work", work, "--ds-stage", str(stage),
                                       "--steps", str(args.steps), "--clip", str(args.clip), "--dtype", args.dtype,
                                       "--adam", args.adam],
                                      env=env, stdout=subprocess.DEVNULL if rank else None))
    if any(p.wait() for p in procs):
        raise SystemExit(f"DeepSpeed stage {stage} failed")
    return torch.load(os.path.join(work, f"ds{stage}", "result.pt"))


def compare(stage, clip, dsx_losses, dsx_weights, ds):
    import torch

    rel = sorted(abs(a - b) / abs(b) for a, b in zip(dsx_losses, ds["losses"]))
    last = abs(dsx_losses[-1] - ds["losses"][-1]) / abs(ds["losses"][-1])
    diff = total = 0.0
    for name, want in ds["weights"].items():
        if name == "lm_head.weight":
            continue  # tied to wte
        got = dsx_weights[name.removeprefix("transformer.")].float()
        diff += float(torch.sum((got - want).double() ** 2))
        total += float(torch.sum(want.double() ** 2))
    clipped = sum(1 for n in ds["norms"] if n > clip)
    print(f"| {stage} | {rel[len(rel) // 2]:.1e} | {rel[-1]:.1e} | {last:.1e} | {(diff / total) ** 0.5:.1e} | "
          f"{ds['losses'][-1]:.6f} | {clipped} of {len(rel)} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsx", default="build/dsx")
    ap.add_argument("--stages", type=int, nargs="+", default=[0, 1, 2, 3])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--clip", type=float, default=0.3)
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--adam", choices=["torch", "fused"], default="torch",
                    help="DeepSpeed's AdamW: torch's (torch_adam) or its fused CPU op (built on first use)")
    ap.add_argument("--keep", help="work in this directory and leave it")
    ap.add_argument("--ds-work", help=argparse.SUPPRESS)
    ap.add_argument("--ds-stage", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ds_work:
        return ds_rank(args)
    work = args.keep or tempfile.mkdtemp(prefix="dsx-parity-")
    os.makedirs(work, exist_ok=True)
    make_inputs(work)
    print(f"{args.dtype}, gradient_clipping {args.clip}, {args.steps} steps, {WORLD} ranks, {args.adam} Adam\n")
    print("| stage | loss, relative difference: median step | worst step | last step | weights, relative "
          "(L2) | DeepSpeed's last loss | steps clipped |")
    print("|---|---|---|---|---|---|---|")
    ds = {}
    for stage in args.stages:
        dsx_losses, dsx_weights = run_dsx(args, work, stage)
        ds[stage] = run_deepspeed(args, work, stage)
        compare(stage, args.clip, dsx_losses, dsx_weights, ds[stage])
    # The noise floor: DeepSpeed against itself, stage 0 (clip_grad_norm_) beside the ZeRO stages.
    for stage in sorted(ds)[1:] if 0 in ds else []:
        rel = max(abs(a - b) / abs(b) for a, b in zip(ds[0]["losses"], ds[stage]["losses"]))
        w0, w = ds[0]["weights"], ds[stage]["weights"]
        diff = sum(float(((w0[k] - w[k]).double() ** 2).sum()) for k in w)
        total = sum(float((w[k].double() ** 2).sum()) for k in w)
        print(f"DeepSpeed's own stage 0 against its stage {stage}: loss, worst step {rel:.1e}; "
              f"weights {(diff / total) ** 0.5:.1e}")


if __name__ == "__main__":
    main()
