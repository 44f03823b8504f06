"""Builds the tiny random Llama-family model folders of tests/models/data/ with transformers and
writes, beside each, expected.json: what transformers computes on it in float64 (logits of a fixed
token batch, the mean cross-entropy for fixed targets, per-tensor gradient norms and a few gradient
values), so the C++ tests check dsx's reader and CPU model without running Python. Nothing is
downloaded: the models are random. Run once by hand in the peers venv (bash bench/peers/venv.sh):

    .venv-peers/bin/python tests/models/compat/make_llama_fixtures.py tests/models/data

Fixtures (each under 100 KB):
  llama          LlamaForCausalLM, GQA 4/2, llama3 rope_scaling, untied head, fp32
  llama_bf16     the same weights saved in bfloat16 (expected values from the bf16 weights)
  mistral        MistralForCausalLM, GQA 4/1, head_dim 16 != hidden/heads, no sliding window, fp32
  qwen2          Qwen2ForCausalLM, q/k/v biases, tied embeddings, fp32
  qwen2_sharded  the qwen2 weights saved in shards with model.safetensors.index.json
"""

import json
import os
import shutil
import sys

import torch
import transformers

transformers.logging.set_verbosity_error()

BATCH, SEQ = 2, 8


def tiny_configs():
    common = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, rms_norm_eps=1e-5,
                  attn_implementation="eager")
    llama = transformers.LlamaConfig(
        vocab_size=64, intermediate_size=48, num_key_value_heads=2, max_position_embeddings=256,
        tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 128},
        rope_theta=10000.0, **common)
    mistral = transformers.MistralConfig(
        vocab_size=64, intermediate_size=24, num_key_value_heads=1, head_dim=16, max_position_embeddings=128,
        sliding_window=None, tie_word_embeddings=False, rope_theta=1e6, bos_token_id=1, eos_token_id=2, **common)
    qwen2 = transformers.Qwen2Config(
        vocab_size=64, intermediate_size=48, num_key_value_heads=2, max_position_embeddings=128,
        tie_word_embeddings=True, use_sliding_window=False, rope_theta=1e6, bos_token_id=None,
        eos_token_id=[3, 4], **common)
    return {"llama": (transformers.LlamaForCausalLM, llama), "mistral": (transformers.MistralForCausalLM, mistral),
            "qwen2": (transformers.Qwen2ForCausalLM, qwen2)}


def build(cls, config, seed):
    """A random model whose norms and biases are not their init (ones, zeros), so they count."""
    torch.manual_seed(seed)
    model = cls(config).float()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(0.15 * torch.randn_like(p))
    return model


def batch(vocab, seed, rows=BATCH, seq=SEQ):
    g = torch.Generator().manual_seed(seed)
    inputs = torch.randint(0, vocab, (rows, seq), generator=g)
    targets = torch.randint(0, vocab, (rows, seq), generator=g)
    targets[0, 0] = -100  # ignored positions count in neither the sum nor the mean
    targets[1, 3] = -100
    return inputs, targets


def reference(folder, inputs, targets, dtype=torch.float64):
    """transformers on the saved folder, cast to float64 (RoPE angles stay fp32, as it computes them)."""
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").to(dtype)
    model.eval()
    logits = model(input_ids=inputs).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                             ignore_index=-100)
    loss.backward()
    out = {"inputs": inputs.tolist(), "targets": targets.tolist(), "loss": loss.item(),
           "logits": [float(f"{v:.7g}") for v in logits.detach().reshape(-1).tolist()],
           "grad_norms": {}, "grad_head": {}, "param_sums": {}, "param_head": {}}
    for name, p in model.named_parameters():
        g = p.grad.reshape(-1)
        out["grad_norms"][name] = g.norm().item()
        out["grad_head"][name] = g[:3].tolist()
        out["param_sums"][name] = p.detach().sum().item()
        out["param_head"][name] = p.detach().reshape(-1)[:3].tolist()
    return out


def save(model, folder, dtype=torch.float32, **kwargs):
    shutil.rmtree(folder, ignore_errors=True)
    model.to(dtype).save_pretrained(folder, **kwargs)
    model.float()


def write_expected(folder, seed):
    config = transformers.AutoConfig.from_pretrained(folder)
    inputs, targets = batch(config.vocab_size, seed)
    expected = reference(folder, inputs, targets)
    expected["transformers"] = transformers.__version__
    lines = [f"{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}" for k, v in expected.items()]
    with open(os.path.join(folder, "expected.json"), "w") as f:
        f.write("{\n" + ",\n".join(lines) + "\n}\n")  # one line per key: small, still readable


def main(out):
    for seed, (name, (cls, config)) in enumerate(tiny_configs().items()):
        model = build(cls, config, 1000 + seed)
        save(model, os.path.join(out, name))
        write_expected(os.path.join(out, name), 77)
        if name == "llama":
            save(model, os.path.join(out, "llama_bf16"), torch.bfloat16)
            write_expected(os.path.join(out, "llama_bf16"), 77)
        if name == "qwen2":
            save(model, os.path.join(out, "qwen2_sharded"), max_shard_size="20KB")
            write_expected(os.path.join(out, "qwen2_sharded"), 77)
    for name in sorted(os.listdir(out)):
        size = sum(os.path.getsize(os.path.join(out, name, f)) for f in os.listdir(os.path.join(out, name)))
        print(f"{name}: {sorted(os.listdir(os.path.join(out, name)))}, {size} bytes")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/models/data")
