#!/usr/bin/env bash
# Creates (once) the Python virtual environment that holds dsx's peers and oracles: PyTorch,
# DeepSpeed, transformers, safetensors, TensorBoard (and its PyTorch profiler plugin). Used only by compatibility scripts and
# benchmarks, never by CI. Prints the venv's python on the last line.
# Usage: bash bench/peers/venv.sh   (env DSX_PEERS_VENV overrides the location)
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${DSX_PEERS_VENV:-$PWD/.venv-peers}
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9   # several scripts may ask at once; one builds, the others wait
if [[ ! -f "$venv/.complete" ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip wheel setuptools
  "$venv/bin/pip" install -q torch numpy
  # DeepSpeed's setup imports torch, so it builds against the one just installed.
  DS_BUILD_OPS=0 "$venv/bin/pip" install -q --no-build-isolation deepspeed
  "$venv/bin/pip" install -q transformers accelerate safetensors tensorboard hjson pydantic
  "$venv/bin/pip" install -q "bitsandbytes>=0.47"  # NF4 on the CPU: bench/kernels/nf4_peers.py
  touch "$venv/.complete"
fi
# TensorBoard's PyTorch profiler plugin reads dsx's --profile traces (bench/trace/); added later
# than the rest, so a venv made before it gets it here.
"$venv/bin/python" -c "import torch_tb_profiler" 2>/dev/null || "$venv/bin/pip" install -q torch-tb-profiler
# transformers converts a tokenizer.model (Llama 2, Mistral) to its fast tokenizer through these;
# without them it reads the file as tiktoken and fails.
"$venv/bin/python" -c "import sentencepiece, google.protobuf" 2>/dev/null ||
  "$venv/bin/pip" install -q sentencepiece protobuf
# PEFT: the LoRA oracle (tests/models/compat/make_lora_fixtures.py) and peer (bench/models/run_lora_step.sh).
"$venv/bin/python" -c "import peft" 2>/dev/null || "$venv/bin/pip" install -q peft
echo "$venv/bin/python"
