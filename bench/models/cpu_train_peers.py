"""The PyTorch peers of bench_cpu_train: transformers' GPT2LMHeadModel or LlamaForCausalLM with
the shape of dsx's preset, the same batch of random tokens and the same step (forward,
cross-entropy, backward, AdamW with decay on matrices only), eager and torch.compile, on the given
number of threads. One JSON line each.
usage: python cpu_train_peers.py --threads N [--model gpt2-bench|llama-bench --batch 4 --seq 256
       --warmup 2 --steps 5]
"""
import argparse
import json
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM


def build(name, seq):
    """transformers' model of dsx's preset (models/gpt2/config.cpp, models/llama/config.cpp)."""
    if name == "gpt2-bench":
        return GPT2LMHeadModel(GPT2Config(n_layer=6, n_head=6, n_embd=384, vocab_size=50257, n_positions=seq,
                                          activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0,
                                          attn_pdrop=0.0))
    if name == "llama-bench":
        return LlamaForCausalLM(LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1376,
                                            num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=2,
                                            head_dim=64, max_position_embeddings=max(seq, 512),
                                            tie_word_embeddings=False))
    raise SystemExit(f"cpu_train_peers.py: no peer for preset {name}")


def run(mode, args):
    torch.manual_seed(0)
    model = build(args.model, args.seq).float().train()
    vocab = model.config.vocab_size
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    x = torch.randint(0, vocab, (args.batch, args.seq))
    y = torch.randint(0, vocab, (args.batch, args.seq))

    def loss_fn(x, y):
        logits = model(x).logits
        return torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))

    fn = torch.compile(loss_fn) if mode == "torch.compile" else loss_fn
    times, cpu_times = [], []
    for step in range(args.warmup + args.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        loss = fn(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
            cpu_times.append(time.process_time() - c0)
    best = min(times)  # the least disturbed by other load, as bench_cpu_train reports
    print(json.dumps({"impl": f"transformers {mode}", "threads": torch.get_num_threads(), "step_s": round(best, 4),
                      "cpu_s": round(min(cpu_times), 4),
                      "tokens_per_s": round(args.batch * args.seq / best, 1), "loss": round(loss.item(), 4)}),
          flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--model", default="gpt2-bench")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--modes", default="eager,torch.compile")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for mode in args.modes.split(","):
        run(mode, args)


if __name__ == "__main__":
    main()
