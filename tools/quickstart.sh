#!/usr/bin/env bash
# The README's first command: installs what is missing, builds dsx, and runs the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bash tools/build.sh >/dev/null
echo
./build/dsx config check configs/zero2.json --world-size 2
