"""The PyTorch peers of run_lora_step.sh: transformers' LlamaForCausalLM of dsx's llama-bench
preset (cpu_train_peers.build), one step of forward, cross-entropy, backward and AdamW, trained in
full and with PEFT's LoRA adapters (base frozen) on the same random tokens, eager, on the given
number of threads. One JSON line each.
usage: python lora_step_peers.py --threads N --targets q_proj,v_proj --r 16 [--batch 2 --seq 512
       --warmup 1 --steps 3]
"""
import argparse
import json
import os
import sys
import time

import peft
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_train_peers import build  # noqa: E402


def step_times(model, args):
    vocab = model.config.vocab_size
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    x = torch.randint(0, vocab, (args.batch, args.seq))
    y = torch.randint(0, vocab, (args.batch, args.seq))
    times, cpu_times = [], []
    for step in range(args.warmup + args.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        logits = model(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
            cpu_times.append(time.process_time() - c0)
    return min(times), min(cpu_times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--targets", default="q_proj,v_proj")
    ap.add_argument("--r", type=int, default=16)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for lora in (False, True):
        torch.manual_seed(0)
        model = build("llama-bench", args.seq).float().train()
        if lora:
            config = peft.LoraConfig(r=args.r, lora_alpha=2 * args.r, target_modules=args.targets.split(","))
            model = peft.get_peft_model(model, config)
        best, cpu = step_times(model, args)
        print(json.dumps({"impl": "PEFT LoRA" if lora else "transformers full", "lora": lora, "step_s": round(best, 4),
                          "cpu_s": round(cpu, 4), "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad)}),
              flush=True)


if __name__ == "__main__":
    main()
