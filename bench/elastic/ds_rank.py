"""One DeepSpeed rank of the goodput bench's peer job (bench/elastic/bench_goodput.py starts it under
torchrun --max_restarts): the quickstart's model size (GPT-2, byte vocabulary, 2 layers, 64 channels,
4 heads, 64 positions) and ds_config (micro-batch 16, ZeRO-2 with overlap_comm, AdamW with warm-up
and cosine decay, clipping 1.0) on the CPU over gloo. It resumes with DeepSpeed's own
load_checkpoint from --save when a checkpoint is there, saves with save_checkpoint every
--save_interval steps, and prints `step N` on rank 0 after each step (the bench times these lines).
Every step's batch is drawn from a generator seeded by (step, rank), so a resumed run continues the
data order. With --global_batch G (an elastic job, torchrun --nnodes MIN:MAX) the gradient
accumulation is G / (16 x world size), so that a job re-formed on fewer nodes keeps its global batch,
and ZeRO's elastic_checkpoint lets the checkpoint load at the new world size.
usage (under torchrun): ds_rank.py --steps N --save_interval K --save DIR --comm_timeout S
                          [--join_timeout S] [--global_batch G]
"""
import argparse
import datetime
import os


def ds_config(steps, accumulation=1, elastic=False):
    config = {"train_micro_batch_size_per_gpu": 16, "gradient_accumulation_steps": accumulation, "gradient_clipping": 1.0,
            "steps_per_print": 1 << 30,
            "optimizer": {"type": "AdamW", "params": {"lr": 2e-3, "betas": [0.9, 0.98], "eps": 1e-8,
                                                      "weight_decay": 0.01, "torch_adam": True}},
            "scheduler": {"type": "WarmupCosineLR",
                          "params": {"total_num_steps": steps, "warmup_num_steps": 50, "warmup_type": "linear",
                                     "cos_min_ratio": 0.1}},
            "zero_optimization": {"stage": 2, "overlap_comm": True, "contiguous_gradients": True,
                                  "reduce_scatter": True, "reduce_bucket_size": 20000,
                                  "allgather_bucket_size": 20000}}
    if elastic:
        config["zero_optimization"]["elastic_checkpoint"] = True
    return config


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--save_interval", type=int, required=True)
    ap.add_argument("--save", required=True)
    ap.add_argument("--comm_timeout", type=float, default=300)
    ap.add_argument("--join_timeout", type=float, default=600)
    ap.add_argument("--global_batch", type=int, default=0)
    args = ap.parse_args()
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import torch
    import deepspeed
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.set_num_threads(1)
    # Joining may take long on a busy machine (every rank imports torch again after a restart); the
    # short comm timeout applies to the collectives of training, as DSX_COMM_TIMEOUT does in dsx.
    deepspeed.init_distributed(dist_backend="gloo", timeout=datetime.timedelta(seconds=args.join_timeout))
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    accumulation = args.global_batch // (16 * world) if args.global_batch else 1
    if args.global_batch and accumulation * 16 * world != args.global_batch:
        raise SystemExit(f"--global_batch {args.global_batch} is not a multiple of 16 x {world} ranks")
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=256, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                                       bos_token_id=0, eos_token_id=0, tie_word_embeddings=True))
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                           config=ds_config(args.steps, accumulation, args.global_batch > 0))
    for group in list(torch.distributed.distributed_c10d._world.pg_map):  # DeepSpeed's groups too
        torch.distributed.set_timeout(datetime.timedelta(seconds=args.comm_timeout), group)
    step = 0
    if os.path.exists(os.path.join(args.save, "latest")):
        _, client = engine.load_checkpoint(args.save)
        step = client["step"]
        if rank == 0:
            print(f"resumed from step {step}", flush=True)
    while step < args.steps:
        for micro in range(accumulation):  # engine.step() steps the optimizer at the last one
            data = torch.Generator().manual_seed(step * 1000 + rank + micro * 1000003)
            tokens = torch.randint(0, 256, (16, 65), generator=data)
            logits = engine(input_ids=tokens[:, :-1]).logits
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), tokens[:, 1:].reshape(-1))
            engine.backward(loss)
            engine.step()
        step += 1
        if step % args.save_interval == 0 or step == args.steps:
            engine.save_checkpoint(args.save, client_state={"step": step})
        if rank == 0:
            print(f"step {step}", flush=True)


if __name__ == "__main__":
    main()
