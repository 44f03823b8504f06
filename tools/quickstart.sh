#!/usr/bin/env bash
# The README's first command: installs what is missing, builds dsx, and runs the main job — a
# byte-level GPT-2 learns two-digit addition on 2 ranks with ZeRO-2 and overlap_comm, saves a
# checkpoint, and then answers sums it never saw, read back from that checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
echo "quickstart: building dsx into build/ (the first build takes a few minutes)"
# A fresh build/ gets the quickest configuration; one that exists keeps its options, so the tests
# and benches that tools/test.sh configured stay built.
options=()
[[ -f build/CMakeCache.txt ]] || options=(-DDSX_CUDA=OFF -DDSX_BUILD_TESTS=OFF -DDSX_BUILD_BENCH=OFF)
bash tools/build.sh "${options[@]}" >/dev/null
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}  # two ranks share this machine's cores
rm -rf checkpoints/quickstart
echo
echo "quickstart: dsx launch --num_gpus 2 dsx train --deepspeed_config configs/quickstart.json"
./build/dsx launch --num_gpus 2 --master_port "${MASTER_PORT:-29500}" \
  ./build/dsx train --deepspeed_config configs/quickstart.json --steps 1500 --eval_interval 500 \
  --save checkpoints/quickstart
echo
echo "quickstart: the saved model answers (dsx sample --weights checkpoints/quickstart/model.safetensors)"
for sum in 47+38 90+19 5+66; do
  ./build/dsx sample --weights checkpoints/quickstart/model.safetensors --add "$sum"
done
./build/dsx sample --weights checkpoints/quickstart/model.safetensors --eval-add 1000
