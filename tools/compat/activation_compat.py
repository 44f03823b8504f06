#!/usr/bin/env python3
"""PyTorch as the check on `dsx estimate`'s activation formulas.

Runs one training forward of small Hugging Face GPT-2 and Llama-style models in bf16 on the CPU
and adds up the bytes autograd saves for backward (saved_tensors_hooks; each storage once,
parameters excluded). Two depths (2 and 4 blocks) separate the per-block bytes from the rest
(embedding, final norm, loss). Prints both beside `dsx estimate --json`'s figures.

Peers only, never CI:  python tools/compat/activation_compat.py --dsx build/dsx
"""
import argparse
import contextlib
import io
import json
import subprocess
import sys

BATCH, SEQ = 2, 256

# (label, family, attention in transformers, attention in dsx, config arguments, dsx shape flags)
CASES = [
    ("GPT-2 124M width, eager attention, dropout 0.1", "gpt2", "eager", "eager",
     dict(activation_function="gelu_pytorch_tanh"),
     "--arch gpt2 --hidden 768 --heads 12 --vocab 50257 --tied-embeddings"),
    ("Llama-style (GQA 8/2 heads, SwiGLU), eager attention", "llama", "eager", "eager",
     dict(hidden_size=512, intermediate_size=1376, num_attention_heads=8, num_key_value_heads=2,
          vocab_size=32000),
     "--arch llama --hidden 512 --intermediate 1376 --heads 8 --kv-heads 2 --vocab 32000"),
    ("Llama-style (GQA 8/2 heads, SwiGLU), sdpa = CPU flash attention", "llama", "sdpa", "flash",
     dict(hidden_size=512, intermediate_size=1376, num_attention_heads=8, num_key_value_heads=2,
          vocab_size=32000),
     "--arch llama --hidden 512 --intermediate 1376 --heads 8 --kv-heads 2 --vocab 32000"),
]


def saved_bytes(model, ids):
    import torch
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in params and s.data_ptr() != 0:
            seen[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, labels=ids)
    return sum(seen.values())


def measure(family, attention, kwargs, layers):
    import torch
    import transformers
    torch.manual_seed(0)
    if family == "gpt2":
        config = transformers.GPT2Config(n_layer=layers, attn_implementation=attention, **kwargs)
        model, vocab = transformers.GPT2LMHeadModel(config), config.vocab_size
    else:
        config = transformers.LlamaConfig(num_hidden_layers=layers, attn_implementation=attention, **kwargs)
        model, vocab = transformers.LlamaForCausalLM(config), config.vocab_size
    model = model.to(torch.bfloat16).train()
    return saved_bytes(model, torch.randint(0, vocab, (BATCH, SEQ)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsx", required=True, help="path of the dsx binary")
    args = parser.parse_args()
    with contextlib.redirect_stdout(io.StringIO()):
        import torch
    tokens = BATCH * SEQ
    print(f"PyTorch {torch.__version__}, bf16, micro-batch {BATCH} x {SEQ} tokens; bytes per token\n")
    print("| model | block: PyTorch | block: dsx | dsx / PyTorch | rest: PyTorch | rest: dsx | dsx / PyTorch |")
    print("|---|---|---|---|---|---|---|")
    for label, family, attention, dsx_attention, kwargs, shape in CASES:
        two, four = (measure(family, attention, kwargs, n) for n in (2, 4))
        block = (four - two) / 2 / tokens
        rest = (two - 2 * (four - two) / 2) / tokens
        cmd = (f"{args.dsx} estimate {shape} --layers 2 --seq-len {SEQ} --micro-batch {BATCH} "
               f"--attention {dsx_attention} --stage 0 --json").split()
        act = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["activations"]
        dsx_block = act["block_bytes_per_token"]
        dsx_rest = (act["embedding"] + act["logits"]) / tokens
        print(f"| {label} | {block:.0f} | {dsx_block} | {dsx_block / block:.2f} | {rest:.0f} | {dsx_rest:.0f} "
              f"| {dsx_rest / rest:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
