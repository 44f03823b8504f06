#!/usr/bin/env python3
"""DeepSpeed as the oracle for `dsx estimate`.

Counts each preset model's parameters with the real Hugging Face classes (built on the meta
device, so nothing is allocated or downloaded), then asks DeepSpeed's own pure-arithmetic
estimators (estimate_zero2_model_states_mem_needs, estimate_zero3_model_states_mem_needs) for
the model-state bytes of every offload option, and, given the dsx binary, compares them with
`dsx estimate --json` value by value.

Peers only, never CI: run it with the python that `bash bench/peers/venv.sh` prints.
  python tools/compat/estimate_compat.py                  # DeepSpeed's figures as JSON
  python tools/compat/estimate_compat.py --dsx build/dsx  # compare, print a markdown table
Exit status 1 when any figure differs.
"""
import argparse
import contextlib
import io
import json
import subprocess
import sys


def llama(hidden, intermediate, layers, heads, kv_heads, vocab, context):
    """LlamaConfig's arguments for an untied Llama of these sizes."""
    return dict(hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
                num_attention_heads=heads, num_key_value_heads=kv_heads, vocab_size=vocab,
                max_position_embeddings=context, tie_word_embeddings=False)


# (dsx preset name, transformers config class, its arguments). Shapes as published by the
# model authors; the dsx presets in tools/estimate/model_presets.cpp must match.
# llama(hidden, intermediate, layers, heads, kv_heads, vocab, context)
PRESETS = [
    ("gpt2", "GPT2Config", dict(n_layer=12, n_embd=768, n_head=12)),
    ("gpt2-medium", "GPT2Config", dict(n_layer=24, n_embd=1024, n_head=16)),
    ("gpt2-large", "GPT2Config", dict(n_layer=36, n_embd=1280, n_head=20)),
    ("gpt2-xl", "GPT2Config", dict(n_layer=48, n_embd=1600, n_head=25)),
    ("llama2-7b", "LlamaConfig", llama(4096, 11008, 32, 32, 32, 32000, 4096)),
    ("llama2-13b", "LlamaConfig", llama(5120, 13824, 40, 40, 40, 32000, 4096)),
    ("llama2-70b", "LlamaConfig", llama(8192, 28672, 80, 64, 8, 32000, 4096)),
    ("llama3-8b", "LlamaConfig", llama(4096, 14336, 32, 32, 8, 128256, 8192)),
]

# (GPUs per node, nodes) for every model.
SETUPS = [(1, 1), (2, 1), (8, 1), (8, 4), (4, 16)]


def count_params(config_class, kwargs):
    """Total parameters (shared ones once) and the largest single module's own parameters,
    exactly as DeepSpeed's model_to_params walks a model, on a meta-device HF model."""
    import torch
    import transformers
    config = getattr(transformers, config_class)(**kwargs)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    # DeepSpeed dedups shared tensors by data_ptr, which meta tensors lack; parameters()
    # dedups them by identity, which is the same thing for tied embeddings.
    total = sum(p.numel() for p in model.parameters())
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    return total, largest


def check_counting_against_deepspeed():
    """On a real (CPU) GPT-2 124M, DeepSpeed's own model_to_params must give the same two
    counts as count_params does on the meta device."""
    import torch
    import transformers
    from deepspeed.runtime.zero.stage3 import model_to_params
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config())
    return model_to_params(model) == count_params("GPT2Config", {})


def deepspeed_figures(total, largest, gpus_per_node, nodes):
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs as z2
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs as z3
    rows = []
    for offload in (False, True):
        cpu, gpu = z2(total, gpus_per_node, nodes, cpu_offload=offload)
        rows.append(dict(stage=2, offload_optimizer=offload, offload_param=False, zero_init=True,
                         gpu=gpu, cpu=cpu))
    for offload_opt, offload_param in ((False, False), (True, False), (True, True)):
        for zero_init in (True, False):
            cpu, gpu, _ = z3(total, largest, gpus_per_node, nodes, cpu_offload=offload_opt,
                             cpu_offload_params=offload_param, zero_init=zero_init)
            rows.append(dict(stage=3, offload_optimizer=offload_opt, offload_param=offload_param,
                             zero_init=zero_init, gpu=gpu, cpu=cpu))
    return rows


def dsx_figures(dsx, preset, gpus_per_node, nodes, zero_init):
    cmd = [dsx, "estimate", "--model", preset, "--gpus-per-node", str(gpus_per_node), "--nodes",
           str(nodes), "--stage", "2", "--stage", "3", "--zero-init", "1" if zero_init else "0", "--json"]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsx", help="path of the dsx binary to compare with")
    args = parser.parse_args()

    with contextlib.redirect_stdout(io.StringIO()):  # DeepSpeed's import banner
        import deepspeed
    report = {"deepspeed": deepspeed.__version__, "models": []}
    counting_ok = check_counting_against_deepspeed()
    report["counting_matches_model_to_params"] = counting_ok
    mismatches = 0 if counting_ok else 1
    table = []
    for preset, config_class, kwargs in PRESETS:
        total, largest = count_params(config_class, kwargs)
        entry = {"model": preset, "params": total, "largest_layer_params": largest, "setups": []}
        for gpus_per_node, nodes in SETUPS:
            ds_rows = deepspeed_figures(total, largest, gpus_per_node, nodes)
            entry["setups"].append({"gpus_per_node": gpus_per_node, "nodes": nodes, "rows": ds_rows})
            if not args.dsx:
                continue
            dsx_out = {zi: dsx_figures(args.dsx, preset, gpus_per_node, nodes, zi) for zi in (True, False)}
            for ds in ds_rows:
                out = dsx_out[ds["zero_init"]]
                if out["model"]["params"] != total or out["model"]["largest_layer_params"] != largest:
                    mismatches += 1
                match = [r for r in out["rows"] if r["stage"] == ds["stage"]
                         and (r["offload_optimizer"] == "cpu") == ds["offload_optimizer"]
                         and (r["offload_param"] == "cpu") == ds["offload_param"]]
                got_gpu = match[0]["gpu"]["model_states"] if match else None
                got_cpu = match[0]["cpu_per_node"]["model_states"] if match else None
                same = got_gpu == ds["gpu"] and got_cpu == ds["cpu"]
                mismatches += 0 if same else 1
                if ds["stage"] == 3 and ds["offload_optimizer"]:
                    # ZeRO-Infinity rows keep DeepSpeed's GPU figure for the same offload to the CPU.
                    nvme = [r for r in out["rows"] if r["stage"] == 3
                            and r["offload_optimizer"] == "nvme"
                            and (r["offload_param"] == "nvme") == ds["offload_param"]]
                    nvme_same = bool(nvme) and nvme[0]["gpu"]["model_states"] == ds["gpu"]
                    mismatches += 0 if nvme_same else 1
                    same = same and nvme_same
                table.append((preset, total, largest, gpus_per_node, nodes, ds, got_gpu, got_cpu, same))
        report["models"].append(entry)

    if not args.dsx:
        json.dump(report, sys.stdout, indent=1)
        print()
        return 0
    print(f"DeepSpeed {deepspeed.__version__}; parameter counting agrees with DeepSpeed's "
          f"model_to_params on GPT-2 124M: {'yes' if counting_ok else 'NO'}\n")
    print("| model | params | largest layer | GPUs/node x nodes | stage | offload | zero_init "
          "| DeepSpeed GPU B | dsx GPU B | DeepSpeed CPU B | dsx CPU B | equal |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for preset, total, largest, g, n, ds, got_gpu, got_cpu, same in table:
        off = "param+opt" if ds["offload_param"] else ("optimizer" if ds["offload_optimizer"] else "none")
        zi = ("1" if ds["zero_init"] else "0") if ds["stage"] == 3 else "-"
        print(f"| {preset} | {total} | {largest} | {g}x{n} | {ds['stage']} | {off} | {zi} | {ds['gpu']} "
              f"| {got_gpu} | {ds['cpu']} | {got_cpu} | {'yes' if same else 'NO'} |")
    print(f"\n{len(table)} figures compared, {mismatches} differ")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
