"""GPT-2 reference check against Hugging Face transformers (outside CI: needs the peers venv).

For a few configurations: random GPT2LMHeadModel weights (LayerNorms perturbed so they matter)
saved as safetensors, one random batch; dsx (gpt2_reference) and transformers compute logits,
loss and every parameter gradient in fp32; each must agree within 1e-4 relative (max |diff| /
max |reference| per tensor). Then the weights as re-exported by dsx are loaded with
GPT2LMHeadModel.from_pretrained and must give the same logits.

usage: python hf_reference.py --exe BUILD/bench/models/gpt2_reference
"""
import argparse
import os
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import load_file, save_file
from transformers import GPT2Config, GPT2LMHeadModel

TOL = 1e-4


def rel_err(ours, ref):
    return ((ours - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()


def check(exe, name, n_layer, n_head, n_embd, vocab, n_pos, B, T, seed):
    torch.manual_seed(seed)
    cfg = GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=n_embd, vocab_size=vocab, n_positions=n_pos,
                     activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     bos_token_id=vocab - 1, eos_token_id=vocab - 1)
    model = GPT2LMHeadModel(cfg).float()
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "ln_" in n:
                p.add_(0.1 * torch.randn_like(p))
            if n.endswith(".bias") and "ln_" not in n:
                p.copy_(0.02 * torch.randn_like(p))
    model.eval()
    inputs = torch.randint(0, vocab, (B, T), dtype=torch.int32)
    targets = torch.randint(0, vocab, (B, T), dtype=torch.int32)
    targets[0, 1] = -1  # an ignored position (dsx: target < 0)

    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d, safe_serialization=True)
        save_file({"inputs": inputs, "targets": targets}, os.path.join(d, "batch.safetensors"))
        os.makedirs(os.path.join(d, "export"))
        subprocess.run([exe, os.path.join(d, "model.safetensors"), os.path.join(d, "batch.safetensors"), d],
                       check=True, stdout=subprocess.DEVNULL)
        ours = load_file(os.path.join(d, "dsx_outputs.safetensors"))
        grads = load_file(os.path.join(d, "dsx_grads.safetensors"))

        logits = model(inputs.long()).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1).long(),
                                                 ignore_index=-1)
        model.zero_grad()
        loss.backward()

        rows = [("logits", rel_err(ours["logits"], logits.detach())),
                ("loss", rel_err(ours["loss"], loss.detach().reshape(1)))]
        worst_grad, worst_name = 0.0, ""
        for n, p in model.named_parameters():
            key = n.removeprefix("transformer.")
            if key == "lm_head.weight":
                continue  # tied to wte: its gradient is in wte's
            e = rel_err(grads[key], p.grad)
            if e > worst_grad:
                worst_grad, worst_name = e, key
        rows.append((f"gradients (worst: {worst_name})", worst_grad))

        exported = GPT2LMHeadModel.from_pretrained(os.path.join(d, "export")).float().eval()
        with torch.no_grad():
            same = torch.equal(exported(inputs.long()).logits, model(inputs.long()).logits)
            weights_equal = all(torch.equal(a, b) for a, b in
                                zip(exported.state_dict().values(), model.state_dict().values()))

    ok = all(e <= TOL for _, e in rows) and same and weights_equal
    print(f"\n{name}: L={n_layer} H={n_head} C={n_embd} V={vocab} B={B} T={T}")
    for what, e in rows:
        print(f"  {what:<45} max rel diff {e:.2e}  {'ok' if e <= TOL else 'FAIL'} (tolerance {TOL:g})")
    print(f"  dsx export loads in transformers: weights bit-equal {weights_equal}, logits equal {same}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", required=True)
    args = ap.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    print(f"torch {torch.__version__}, transformers {__import__('transformers').__version__}")
    ok = check(args.exe, "byte-level", 2, 4, 64, 256, 64, 4, 32, 0)
    ok &= check(args.exe, "GPT-2 vocabulary (padded to 50304 in dsx)", 2, 6, 96, 50257, 128, 2, 48, 1)
    # 150 positions: dsx's attention runs in causal blocks of 64 query rows (two full, one partial)
    ok &= check(args.exe, "long sequence (blocked attention)", 2, 4, 64, 256, 256, 2, 150, 2)
    print("\nPASS" if ok else "\nFAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
