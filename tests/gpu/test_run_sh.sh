#!/usr/bin/env bash
# tests/gpu/run.sh on a machine without a GPU: fake nvidia-smi, nvcc, CUDA probe and test
# binaries stand in for the GPU machine (run.sh --no-build), and each case checks the exit
# status and what the script says. Runs in the CPU build's ctest (gpu_script.run_sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/gpu/script_checks.sh
source "$root/tests/gpu/script_checks.sh"

# fake <path> <body>: an executable shell script.
fake() {
  mkdir -p "$(dirname "$1")"
  printf '#!/usr/bin/env bash\n%s\n' "$2" >"$1"
  chmod +x "$1"
}

# shellcheck disable=SC2016 # expanded by the fake when it runs
fake "$work/bin/nvidia-smi" '
case "$*" in
  -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-fake)" ;;
  *driver_version*) echo "$FAKE_DRIVER" ;;
  *name*) echo "NVIDIA H200" ;;
  *) echo "| NVIDIA-SMI $FAKE_DRIVER   Driver Version: $FAKE_DRIVER   CUDA Version: $FAKE_DRIVER_CUDA |" ;;
esac'
fake "$work/bin/nvcc" 'echo "Cuda compilation tools, release 13.0, V13.0.88"'

# A gtest binary's output: one passing test, one skipped (as NcclComm.TwoRanksOnTwoGpus on one GPU).
pass_and_skip='cat <<EOF
[==========] Running 2 tests from 1 test suite.
[ RUN      ] NcclComm.OneRank
[       OK ] NcclComm.OneRank (5 ms)
[ RUN      ] NcclComm.TwoRanksOnTwoGpus
tests/gpu/test_gpu_comm.cpp:76: Skipped
needs two GPUs
[  SKIPPED ] NcclComm.TwoRanksOnTwoGpus (0 ms)
[==========] 2 tests from 1 test suite ran. (5 ms total)
[  PASSED  ] 1 test.
[  SKIPPED ] 1 test, listed below:
[  SKIPPED ] NcclComm.TwoRanksOnTwoGpus
EOF'
failing='cat <<EOF
[==========] Running 1 test from 1 test suite.
[ RUN      ] GpuTraining.SameWeights
[  FAILED  ] GpuTraining.SameWeights (9 ms)
[==========] 1 test from 1 test suite ran. (9 ms total)
[  PASSED  ] 0 tests.
[  FAILED  ] 1 test, listed below:
[  FAILED  ] GpuTraining.SameWeights
EOF
exit 1'

# check <name> <expected status> <expected text> [env...]: runs run.sh --no-build on $work/build,
# with run_args after it.
run_args=()
check() {
  local name=$1 want=$2 text=$3 status=0 out
  shift 3
  out=$(env PATH="$work/bin:$PATH" FAKE_DRIVER=580.159.04 FAKE_DRIVER_CUDA=13.0 DSX_GPU_DEPS="$work/no-debs" "$@" \
    bash "$root/tests/gpu/run.sh" --no-build "$work/build" "${run_args[@]}" 2>&1) || status=$?
  judge "$name" "$want" "$text" "$status" "$out"
}

probe_one_device='echo "runtime=13000 driver=13000 devices=1"'
fake "$work/build/cuda_probe" "$probe_one_device"
fake "$work/build/tests/gpu/test_gpu_comm" "$pass_and_skip"

check "a skip is reported, not a failure" 0 "summary: 1 passed, 0 failed, 1 skipped"
check "the skipped test is named with its reason" 0 "NcclComm.TwoRanksOnTwoGpus (needs two GPUs)"
check "driver and runtime are printed first" 0 "driver 580.159.04 (supports CUDA 13.0)"
check "the CUDA runtime is printed" 0 "CUDA runtime 13.0"

fake "$work/build/tests/gpu/test_gpu_training" "$failing"
check "a failing test fails the run" 1 "| test_gpu_training | FAILED | 0 | 1 | 0 | GpuTraining.SameWeights |"
check "failures are counted" 1 "summary: 1 passed, 1 failed, 1 skipped"
rm "$work/build/tests/gpu/test_gpu_training"

# Time limits: a binary past its own is cut and failed; one that starts after the run's budget is
# spent is not run, and the run fails.
fake "$work/build/tests/gpu/test_gpu_training" 'echo "[ RUN      ] GpuTraining.Slow"; sleep 30'
check "a binary past its time limit is cut and failed" 1 "| test_gpu_training | FAILED | 0 | 0 | 0 | timed out after 2 s" \
  DSX_TEST_TIMEOUT=2
holds "a cut binary's output is kept in its log" "$work/build/logs/test_gpu_training.log" "GpuTraining.Slow"
rm "$work/build/tests/gpu/test_gpu_training"
check "binaries after the budget is spent are not run" 1 "| test_gpu_comm | NOT RUN | - | - | - | the run's budget (DSX_RUN_BUDGET=3 s) is spent" \
  DSX_RUN_BUDGET=3
run_args=(--only no_such_binary)
check "--only picks binaries by name" 0 "summary: 0 passed, 0 failed, 0 skipped"
run_args=(--bogus)
check "an unknown option is refused" 1 "unknown option --bogus"
run_args=()

check "an old driver is named as such" 3 "driver 575.57.08 is too old for the CUDA 13 runtime, which needs driver >= 580" \
  FAKE_DRIVER=575.57.08 FAKE_DRIVER_CUDA=12.9
fake "$work/build/cuda_probe" 'echo "runtime=13000 driver=12090 devices=0 error=cudaErrorInsufficientDriver (x)"; exit 1'
check "the probe's insufficient-driver error is a mismatch" 3 "is too old for the CUDA 13 runtime"
fake "$work/build/cuda_probe" 'echo "runtime=13000 driver=13000 devices=0 error=cudaErrorNoDevice (no CUDA-capable device is detected)"; exit 1'
check "no device for CUDA fails loudly" 2 "CUDA sees no device although nvidia-smi lists 1"
fake "$work/build/cuda_probe" "$probe_one_device"
check "no nvidia-smi fails loudly" 2 "no NVIDIA GPU visible" PATH="$work/nobin:/usr/bin:/bin"

# Prepared packages (tests/gpu/prepare.sh): a one-file .deb is unpacked into the build's prefix,
# unless the MANIFEST asks for a newer glibc than this machine's.
mkdir -p "$work/deb/usr/lib/x86_64-linux-gnu" "$work/deb/DEBIAN" "$work/debs"
echo fake >"$work/deb/usr/lib/x86_64-linux-gnu/libdsxfake.so.1"
printf 'Package: dsx-fake\nVersion: 1\nArchitecture: amd64\nMaintainer: dsx\nDescription: test\n' >"$work/deb/DEBIAN/control"
dpkg-deb --build "$work/deb" "$work/debs/dsx-fake.deb" >/dev/null
echo "needs-glibc 2.0" >"$work/debs/MANIFEST"
check "prepared packages are unpacked into the build's prefix" 0 "| libraries from $work/debs | ok | - | - | - | 1 packages in $work/build/deps-prefix" \
  DSX_GPU_DEPS="$work/debs"
if [[ -f $work/build/deps-prefix/usr/lib/x86_64-linux-gnu/libdsxfake.so.1 ]]; then
  pass "the package's file is in the prefix"
else
  fail "the package's file is not in $work/build/deps-prefix"
fi
echo "needs-glibc 99.0" >"$work/debs/MANIFEST"
check "packages for a newer glibc are refused" 1 "need glibc >= 99.0, this machine has" DSX_GPU_DEPS="$work/debs"
printf 'needs-glibc 2.0\nneeds-glibcxx 3.4.99\n' >"$work/debs/MANIFEST"
check "packages for a newer libstdc++ are refused" 1 "need libstdc++ GLIBCXX_3.4.99, the compiler's" DSX_GPU_DEPS="$work/debs"

# A bundle (tools/gpu_bundle.sh) of kind cuda, on the fake GPU: binaries whose NVIDIA libraries the
# image lacks. Real ELF files (copies of true) are given a library that exists nowhere with the
# name of cuDNN's or cudart's, as patchelf would leave them.
if command -v patchelf >/dev/null; then
  fb=$work/fakebundle
  mkdir -p "$fb/tests/gpu" "$fb/lib"
  fake "$fb/cuda_probe" "$probe_one_device"
  fake "$fb/tests/gpu/test_gpu_comm" "$pass_and_skip"
  cp "$(type -P true)" "$fb/tests/gpu/test_gpu_cudnn"
  patchelf --add-needed libcudnn_dsxfake.so.9 "$fb/tests/gpu/test_gpu_cudnn"
  cp "$(type -P true)" "$fb/tests/gpu/test_gpu_zero"
  patchelf --add-needed libcudart_dsxfake.so.12 "$fb/tests/gpu/test_gpu_zero"
  # cuDNN's loader carried in the bundle (lib/cudnn-shim) lets a binary start on an image without cuDNN.
  mkdir -p "$fb/lib/cudnn-shim"
  cc -shared -o "$fb/lib/cudnn-shim/libcudnn_dsxshim.so.9" -x c /dev/null
  cp "$(type -P true)" "$fb/tests/gpu/test_gpu_llama"
  patchelf --add-needed libcudnn_dsxshim.so.9 "$fb/tests/gpu/test_gpu_llama"
  # A CUDA library only Python's nvidia-* wheels have (as in a PyTorch image): found and put on the path.
  mkdir -p "$work/wheels/nvidia/cuda_runtime/lib"
  cc -shared -o "$work/wheels/nvidia/cuda_runtime/lib/libcudart_dsxwheel.so.12" -x c /dev/null
  # The image's Python, for the rest of this file: it has the wheel.
  fake "$work/bin/python3" "[[ \$* == *nvidia.__path__* ]] && echo $work/wheels/nvidia || exit 1"
  cp "$(type -P true)" "$fb/tests/gpu/test_gpu_gpt2"
  patchelf --add-needed libcudart_dsxwheel.so.12 "$fb/tests/gpu/test_gpu_gpt2"
  {
    printf 'dsx-gpu-bundle 1\nkind cuda\ncommit fake\nneeds-glibc 2.0\nneeds-glibcxx 3.4.0\ncxx-needs-glibc 2.0\n'
    echo "file cuda_probe 1 -"
    echo "file tests/gpu/test_gpu_comm 1 -"
    echo "file tests/gpu/test_gpu_cudnn 1 libcudnn_dsxfake.so.9"
    echo "file tests/gpu/test_gpu_zero 1 libcudart_dsxfake.so.12"
    echo "file tests/gpu/test_gpu_llama 1 libcudnn_dsxshim.so.9"
    echo "file tests/gpu/test_gpu_gpt2 1 libcudart_dsxwheel.so.12"
    echo "file lib/cudnn-shim/libcudnn_dsxshim.so.9 1 -"
  } >"$fb/MANIFEST"
  run_args=(--bundle "$fb" --results "$work/fbres")
  check "bundle: a binary that needs only a missing cuDNN is skipped, with the reason" 1 \
    "| test_gpu_cudnn | skipped | - | - | - | needs libcudnn_dsxfake.so.9, which this image lacks (cuDNN is optional"
  check "bundle: a binary that needs a missing cudart fails, naming it" 1 \
    "| test_gpu_zero | FAILED | - | - | - | cannot start: this image lacks libcudart_dsxfake.so.12"
  check "bundle: the others run" 1 "summary: 1 passed, 1 failed, 2 skipped"
  check "bundle: the NVIDIA libraries found and missing are recorded" 1 \
    "| CUDA libraries | libcudart_dsxfake.so.12 libcudnn_dsxfake.so.9 missing |"
  check "bundle: without cuDNN a binary starts on the bundle's cuDNN loader" 1 "| test_gpu_llama | ok | 0 | 0 | 0 |"
  check "bundle: a library in Python's nvidia wheels is found and loaded" 1 "| test_gpu_gpt2 | ok | 0 | 0 | 0 |"
  if grep -qx "libcudnn_dsxfake.so.9 missing" "$work/fbres/cuda-libraries.txt" &&
    grep -qx "libcudart_dsxwheel.so.12 $work/wheels/nvidia/cuda_runtime/lib/libcudart_dsxwheel.so.12" "$work/fbres/cuda-libraries.txt" &&
    grep -qx "libcudnn_dsxshim.so.9 missing; the bundle's loader alone (lib/cudnn-shim)" "$work/fbres/cuda-libraries.txt"; then
    pass "bundle: cuda-libraries.txt says what is missing"
  else
    fail "bundle: $work/fbres/cuda-libraries.txt lacks 'libcudnn_dsxfake.so.9 missing'"
  fi
  run_args=(--bundle "$fb")
  check "bundle: results go to \$OUT without --results" 1 "summary: 1 passed" OUT="$work/out"
  if [[ -f $work/out/gpu-summary.md && -f $work/out/logs/test_gpu_comm.log ]]; then
    pass "bundle: \$OUT holds the summary and the logs"
  else
    fail "bundle: $work/out lacks gpu-summary.md or logs/test_gpu_comm.log"
  fi
  run_args=()
else
  echo "skip bundle cases: no patchelf (bash tools/setup.sh installs it)"
fi

# The real probe, built with the real nvcc where there is one: on a machine without a GPU it
# must say why CUDA has no device and exit non-zero.
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [[ -x $nvcc ]]; then
  "$nvcc" -o "$work/real_probe" "$root/tests/gpu/cuda_probe.cu"
  status=0
  out=$("$work/real_probe") || status=$?
  if [[ -e /dev/nvidia0 ]]; then
    echo "skip real probe: this machine has a GPU ($out)"
  elif [[ $status == 0 ]] || ! grep -qE '^runtime=[0-9]+ driver=[0-9]+ devices=0 error=cuda' <<<"$out"; then
    fail "real probe without a GPU: exit $status, '$out'"
  else
    pass "real probe without a GPU: $out"
  fi
fi

checks_done run.sh
