#!/usr/bin/env bash
# Compares `dsx config check` with DeepSpeed's own config reading on every shipped and test
# config (see ds_config_compat.py). Needs the peers venv (PyTorch + DeepSpeed + transformers);
# never part of CI.  Usage: bash tools/compat/ds_config_compat.sh [path/to/dsx] [--verbose]
set -euo pipefail
cd "$(dirname "$0")/../.."
dsx=${1:-build/dsx}
shift || true
python=$(bash bench/peers/venv.sh | tail -n 1)
exec "$python" tools/compat/ds_config_compat.py --dsx "$dsx" "$@"
