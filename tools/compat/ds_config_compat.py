#!/usr/bin/env python3
"""DeepSpeed as the oracle for `dsx config check`.

Feeds every shipped config (configs/*.json) and every config of the test suite
(tests/config/configs/*.json) to DeepSpeed's own DeepSpeedConfig and to `dsx config check
--json`, and lists every resolved value on which they differ, and every file that one accepts
and the other refuses.

The command-line inputs of a file come from its header comments: `// world_size: 4` style lines
(test configs) or the `// Check it: dsx config check ... --flag value` line (shipped configs).
Files with "auto" values go through Hugging Face's own resolver first
(transformers' HfTrainerDeepSpeedConfig with TrainingArguments-like values), as a Trainer run
would. The world size is given to DeepSpeed by faking torch.distributed's answers, so no GPU and no process
group are needed (DeepSpeed then divides it by sequence_parallel_size itself).

Peers only, never CI: run it with the python that `bash bench/peers/venv.sh` prints, or use
tools/compat/ds_config_compat.sh.
  python tools/compat/ds_config_compat.py --dsx build/dsx [--verbose]
Exit status 1 when a difference is found that is not explained below (ENGINE_INIT_CHECKS, DELIBERATE).
"""
import argparse
import contextlib
import glob
import io
import json
import logging
import math
import os
import re
import subprocess
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Files DeepSpeedConfig accepts because DeepSpeed checks them later, in deepspeed.initialize()
# (runtime/engine.py of 0.19.8); dsx checks them when it reads the file. -> where DeepSpeed checks.
ENGINE_INIT_CHECKS = {
    "s8_18_sgd_lower.json": "engine.py _configure_optimizer: '{} is not a supported DeepSpeed Optimizer'",
    "rule_onebit_zero.json": "engine.py _configure_optimizer: 'OneBitAdam is not a supported DeepSpeed Optimizer'",
    "s8_18_sgd_zero1.json": "engine.py: 'You are using an untested ZeRO Optimizer'",
    "s8_19_max_grad_norm.json": "engine.py: ''max_grad_norm' is not supported as an optimizer parameter'",
    "rule_lamb_static_scale.json": "engine.py: 'DeepSpeed lamb optimizer requires dynamic loss scaling'",
    "rule_amsgrad_fused.json": "ops/adam/fused_adam.py: 'FusedAdam does not support the AMSGrad variant.'",
    "rule_legacy_stage1.json": "engine.py: 'The deprecated version of ZeRO Stage 1 is not supported'",
    "rule_param_dtype.json": "engine.py _assert_valid_mixed_precision_config: 'param_dtype ... conflicts'",
    "rule_predivide_stage2.json": "zero/stage_1_and_2.py: 'gradient_predivide_factor != 1.0 is not yet supported'",
    "rule_unknown_dtype.json": "DtypeEnum(grad_accum_dtype) when the engine builds its optimizer",
    "rule_nvme_without_path.json": "the NVMe swapper when it opens its files under nvme_path",
    "rule_onecycle_missing.json": "OneCycle(...) construction: missing cycle_min_lr (TypeError)",
    "rule_scheduler_no_params.json": "engine.py _scheduler_from_config: scheduler(**None) (TypeError)",
    "rule_scheduler_typo.json": "engine.py _scheduler_from_config: 'DeepSpeed does not recognize LR scheduler'",
    "rule_unknown_optimizer_param.json": "FusedAdam(learning_rate=...) construction (TypeError)",
}
# Differences in values that dsx makes on purpose (docs/config.md): file -> why.
DELIBERATE = {
    "rule_sequence_parallel.json":
        "DeepSpeed bug: given a file path, DeepSpeedConfig.__init__ tests `\"sequence_parallel_size\" in config` "
        "on the path string instead of the parsed dict, so the world size is not divided (T = 16); given the "
        "same config as a dict it divides (T = 8, as dsx)",
}

TORCH_DTYPES = {"torch.float16": "fp16", "torch.bfloat16": "bf16", "torch.float32": "fp32"}
DTYPE_SPELLINGS = {
    "fp16": "fp16", "float16": "fp16", "half": "fp16", "torch.float16": "fp16",
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "torch.float32": "fp32",
    "bf16": "bf16", "bfloat16": "bf16", "torch.bfloat16": "bf16", "int8": "int8", "torch.int8": "int8",
}
FLAG_NAMES = {"world-size": "world_size", "hidden-size": "hidden_size", "micro-batch": "micro_batch",
              "grad-accum": "grad_accum", "warmup-steps": "warmup_steps", "total-steps": "total_steps",
              "lr": "lr"}


def inputs_of(path):
    """The command-line inputs a config's header comments ask for."""
    inputs = {"world_size": 1}
    header = []
    with open(path) as f:
        for line in f:
            if not line.startswith("//"):
                break
            header.append(line[2:].strip())
    check = ""
    for i, line in enumerate(header):
        m = re.match(r"(\w+):\s*(-?[\d.e+-]+)$", line)
        if m and m.group(1) in FLAG_NAMES.values():
            inputs[m.group(1)] = float(m.group(2)) if m.group(1) == "lr" else int(m.group(2))
        if line.startswith("Check it:"):
            check = line
            j = i
            while check.endswith("\\") and j + 1 < len(header):
                j += 1
                check = check[:-1] + " " + header[j]
    for flag, value in re.findall(r"--([a-z-]+)\s+(\S+)", check):
        if flag in FLAG_NAMES:
            key = FLAG_NAMES[flag]
            inputs[key] = float(value) if key == "lr" else int(value)
    return inputs


def dsx_flags(inputs):
    flags = []
    for flag, key in FLAG_NAMES.items():
        if key in inputs:
            flags += ["--" + flag, str(inputs[key])]
    return flags


def run_dsx(dsx, path, inputs):
    """(values, None) or (None, error text)."""
    r = subprocess.run([dsx, "config", "check", path, "--json"] + dsx_flags(inputs),
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return None, r.stderr.strip()
    return json.loads(r.stdout), None


def contains_auto(value):
    """True when an "auto" sits where Hugging Face resolves it (pipeline.stages "auto" is DeepSpeed's own)."""
    if isinstance(value, dict):
        return any(contains_auto(v) for k, v in value.items() if k != "pipeline")
    if isinstance(value, list):
        return any(contains_auto(v) for v in value)
    return value == "auto"


PYDANTIC_BLOCKS = {"zero_optimization", "fp16", "bf16", "tensorboard", "wandb", "csv_monitor", "comet",
                   "comms_logger"}


def needs_hf(config, inputs):
    outside = {k: v for k, v in config.items() if k not in PYDANTIC_BLOCKS}
    return contains_auto(outside) or ("hidden_size" in inputs and contains_auto(config))


def hf_resolve(config, inputs):
    """Replaces "auto" exactly as a transformers Trainer does, from TrainingArguments-like values."""
    try:
        import accelerate  # noqa: F401  (transformers' DeepSpeed config class is accelerate's)
    except ImportError:
        sys.exit("ds_config_compat: Hugging Face's \"auto\" resolution needs the accelerate package: "
                 "pip install accelerate (into the peers venv)")
    import transformers.integrations.deepspeed as hf_deepspeed
    warmup = inputs.get("warmup_steps", 0)
    args = types.SimpleNamespace(
        world_size=inputs["world_size"], per_device_train_batch_size=inputs.get("micro_batch", 8),
        gradient_accumulation_steps=inputs.get("grad_accum", 1), max_grad_norm=1.0,
        learning_rate=inputs.get("lr", 5e-5), adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8,
        weight_decay=0.0, fp16=False, fp16_full_eval=False, bf16=False, bf16_full_eval=False,
        save_on_each_node=False, get_warmup_steps=lambda n: warmup)
    hf = hf_deepspeed.HfTrainerDeepSpeedConfig(config)
    hf.trainer_config_process(args)
    model = types.SimpleNamespace(config=types.SimpleNamespace(hidden_size=inputs["hidden_size"])) \
        if "hidden_size" in inputs else types.SimpleNamespace(config=types.SimpleNamespace())
    hf.trainer_config_finalize(args, model, inputs.get("total_steps", 0))
    return hf.config


def pretend_distributed(world_size):
    """DeepSpeedConfig asks torch.distributed for the world size only when it is initialised; make
    it look initialised with `world_size` ranks (this process being rank 0)."""
    import deepspeed.comm as dist
    dist.is_initialized = lambda: True
    dist.get_rank = lambda *args, **kwargs: 0
    dist.get_world_size = lambda *args, **kwargs: world_size


def run_deepspeed(path, inputs):
    """(flat values, None) or (None, error text), from DeepSpeed's own config class."""
    import hjson
    from deepspeed.runtime.config import DeepSpeedConfig
    pretend_distributed(inputs["world_size"])
    try:
        with open(path) as f:
            parsed = hjson.load(f)
        with contextlib.redirect_stdout(io.StringIO()):
            # Hugging Face's resolution when the file needs it (an "auto" outside DeepSpeed's pydantic
            # blocks, or a hidden size to resolve bucket sizes); else DeepSpeed alone, which drops "auto"
            # inside pydantic blocks.
            if needs_hf(parsed, inputs):
                config = DeepSpeedConfig(json.loads(json.dumps(hf_resolve(parsed, inputs))))
            else:
                config = DeepSpeedConfig(path)  # the path form: Hjson, duplicate keys checked
    except Exception as e:  # DeepSpeed raises AssertionError, ValueError, ValidationError, ...
        return None, "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
    return flatten_deepspeed(config), None


def dtype_name(value, model_dtype):
    if value is None:
        return model_dtype  # the engine's communication_data_type property: fp16/bf16 by mode
    return TORCH_DTYPES.get(str(value), str(value))


def flatten_deepspeed(c):
    f = {}
    for key in ["train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                "steps_per_print", "wall_clock_breakdown", "memory_breakdown", "dump_state",
                "disable_python_gc", "gradient_clipping", "prescale_gradients", "gradient_predivide_factor",
                "disable_allgather", "dataloader_drop_last", "zero_allow_untested_optimizer",
                "zero_force_ds_cpu_optimizer", "log_level", "managed_gradient_accumulation"]:
        f[key] = getattr(c, key)
    f["gradient_allreduce_op"] = str(getattr(c.gradient_allreduce_op, "value", c.gradient_allreduce_op)).lower()
    model_dtype = "fp16" if c.float16_config.enabled else "bf16" if c.bfloat16_config.enabled else "fp32"
    f["communication_data_type"] = dtype_name(c.communication_data_type, model_dtype)
    f["seq_parallel_communication_data_type"] = dtype_name(c.seq_parallel_communication_data_type, "fp32")
    if c.optimizer_name is not None:
        f["optimizer.name"] = c.optimizer_name
        f["optimizer.legacy_fusion"] = c.optimizer_legacy_fusion
        for k, v in (c.optimizer_params or {}).items():
            f["optimizer.params." + k] = list(v) if isinstance(v, tuple) else v
    if c.scheduler_name is not None:
        f["scheduler.type"] = c.scheduler_name
        for k, v in (c.scheduler_params or {}).items():
            f["scheduler.params." + k] = v
    for prefix, model in [("fp16", c.float16_config), ("bf16", c.bfloat16_config)]:
        for k, v in model.model_dump().items():
            f[prefix + "." + k] = v
    deprecated = {"cpu_offload", "cpu_offload_param", "cpu_offload_use_pin_memory",
                  "stage3_gather_fp16_weights_on_model_save", "leaf_module"}
    for k, v in c.zero_config.model_dump().items():
        if k in deprecated:
            continue
        if isinstance(v, dict) and k.startswith("offload_"):
            for kk, vv in v.items():
                f["zero_optimization.%s.%s" % (k, kk)] = str(vv) if kk == "nvme_path" and vv is not None else vv
        else:
            f["zero_optimization." + k] = getattr(v, "value", v)
    for k, v in vars(c.activation_checkpointing_config).items():
        f["activation_checkpointing." + k] = v
    for k, v in vars(c.flops_profiler_config).items():
        f["flops_profiler." + k] = v
    for name in ["tensorboard", "csv_monitor", "wandb", "comet"]:
        for k, v in getattr(c.monitor_config, name).model_dump().items():
            f[name + "." + k] = v
    f["comms_logger"] = None
    if c.comms_config.comms_logger_enabled:
        del f["comms_logger"]
        for k, v in c.comms_config.comms_logger.model_dump().items():
            f["comms_logger." + k] = v
    f["checkpoint.tag_validation"] = ("FAIL" if c.checkpoint_tag_validation_fail else
                                      "WARN" if c.checkpoint_tag_validation_enabled else "IGNORE")
    f["checkpoint.load_universal"] = c.load_universal_checkpoint
    f["checkpoint.use_node_local_storage"] = c.use_node_local_storage
    f["checkpoint.parallel_write.pipeline_stage"] = c.checkpoint_parallel_write_pipeline
    for k, v in c.aio_config.items():
        f["aio." + k] = v
    # start_step/end_step are internal copies; arg_mappings, model_info(_path) are kept raw by dsx.
    internal = {"start_step", "end_step", "arg_mappings", "model_info", "model_info_path"}
    for k, v in vars(c.autotuning_config).items():
        if k not in internal:
            f["autotuning." + k] = v
    for k in ["grad_accum_dtype", "param_dtype", "buffer_dtype"]:
        v = getattr(c, k)
        f["data_types." + k] = DTYPE_SPELLINGS.get(v, v) if isinstance(v, str) else v
    return f


def same(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or (isinstance(a, bool) and isinstance(b, bool) and a == b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or (math.isfinite(a) and math.isfinite(b) and abs(a - b) <= 1e-12 * max(abs(a), abs(b)))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def compare(dsx_values, ds_values):
    """[(key, deepspeed value, dsx value)] for every key DeepSpeed resolves that dsx lists differently."""
    diffs = []
    for key, ds_value in sorted(ds_values.items()):
        if key not in dsx_values:
            diffs.append((key, ds_value, "<not listed>"))
        elif not same(ds_value, dsx_values[key]):
            diffs.append((key, ds_value, dsx_values[key]))
    return diffs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsx", required=True, help="the dsx binary")
    parser.add_argument("--verbose", action="store_true", help="print both errors for refused files")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    import deepspeed
    files = sorted(glob.glob(os.path.join(ROOT, "configs", "*.json"))) + \
        sorted(glob.glob(os.path.join(ROOT, "tests", "engine", "configs", "*.json")))
    print("DeepSpeed %s vs dsx (%s): %d configs\n" % (deepspeed.__version__, args.dsx, len(files)))
    print("| config | W | DeepSpeed | dsx | values compared | differences |")
    print("|---|---|---|---|---|---|")
    details, unexpected = [], 0
    for path in files:
        name = os.path.relpath(path, ROOT)
        base = os.path.basename(path)
        inputs = inputs_of(path)
        ds_values, ds_error = run_deepspeed(path, inputs)
        dsx_values, dsx_error = run_dsx(args.dsx, path, inputs)
        if ds_error or dsx_error:
            both = ds_error and dsx_error
            print("| %s | %d | %s | %s | – | %s |" % (name, inputs["world_size"], "refuses" if ds_error else "accepts",
                                                    "refuses" if dsx_error else "accepts",
                                                    "none (both refuse)" if both else
                                                    "checked at initialize in DeepSpeed" if base in ENGINE_INIT_CHECKS
                                                    else "**accept/refuse**"))
            if not both:
                if base in ENGINE_INIT_CHECKS and dsx_error:
                    details.append((name, [("(DeepSpeed checks at initialize: %s)" % ENGINE_INIT_CHECKS[base],
                                            "accepted by DeepSpeedConfig", dsx_error)]))
                else:
                    unexpected += 1
                    details.append((name, [("(file)", ds_error or "accepted", dsx_error or "accepted")]))
            elif args.verbose:
                details.append((name, [("(both refuse)", ds_error, dsx_error)]))
            continue
        diffs = compare(dsx_values, ds_values)
        print("| %s | %d | accepts | accepts | %d | %s |" % (name, inputs["world_size"], len(ds_values),
                                                            len(diffs) if diffs else "none"))
        if diffs:
            details.append((name, diffs))
            if base not in DELIBERATE:
                unexpected += 1
    for name, diffs in details:
        print("\n%s%s" % (name, " (deliberate: %s)" % DELIBERATE[os.path.basename(name)]
                          if os.path.basename(name) in DELIBERATE else ""))
        for key, ds_value, dsx_value in diffs:
            print("  %-55s DeepSpeed: %-30s dsx: %s" % (key, json.dumps(ds_value, default=str)[:200],
                                                      json.dumps(dsx_value, default=str)[:200]))
    print("\n%d unexpected difference(s)" % unexpected)
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
