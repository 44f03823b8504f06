#!/usr/bin/env bash
# Compares `dsx torchrun` with PyTorch's torchrun, case by case (see torchrun_compat.py). Needs the
# peers venv (PyTorch); never part of CI.  Usage: bash tools/compat/torchrun_compat.sh [path/to/dsx] [--verbose]
set -euo pipefail
cd "$(dirname "$0")/../.."
dsx=${1:-build/dsx}
shift || true
python=$(bash bench/peers/venv.sh | tail -n 1)
exec "$python" tools/compat/torchrun_compat.py --dsx "$dsx" "$@"
