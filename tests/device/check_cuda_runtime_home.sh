#!/usr/bin/env bash
# device/ is the one home of the CUDA runtime (docs/architecture.md): fails, naming file, line and
# call, when a source outside device/ calls a CUDA runtime function (cudaXxx(...)) other than the
# few a kernel launch needs. cuBLASLt, cuDNN and NCCL calls (cublasLt*, cudnn*, nccl*) are not
# runtime calls and pass. tests/ and bench/ (harnesses that drive the GPU directly) are not
# checked. Usage: check_cuda_runtime_home.sh <source root>
set -u
root=${1:?usage: check_cuda_runtime_home.sh <source root>}
cd "$root" || exit 2

# Calls allowed in one file, with why: "<path> <call> [<call> ...]".
allowed=(
  # A kernel launch's own checks and grid sizing (kernels/cuda/*.cu launch through it).
  "kernels/cuda/launch.cuh cudaGetLastError cudaGetErrorString cudaGetDevice cudaDeviceGetAttribute"
  # Not converted yet (issue 32): their cuBLASLt and cuDNN workspaces are allocated in kernels/,
  # which cannot depend on device/; the owner must hand the workspace in.
  "kernels/cuda/decoder_matmul.cu cudaMalloc cudaFree cudaGetErrorString"
  "kernels/cuda/cudnn_attention.cpp cudaMalloc cudaFree cudaStreamSynchronize cudaGetErrorString"
  # Another change (issue 32, the host syncs of the models) converts these three files; the lead
  # removes these lines when merging it.
  "models/gpt2/gpt2_cuda.cpp *"
  "models/gpt2/gpu_layer_span.h *"
  "models/llama/llama_cuda.cpp *"
)

is_allowed() {  # is_allowed <path> <call>
  local entry
  for entry in "${allowed[@]}"; do
    read -r -a words <<<"$entry"
    [[ ${words[0]} == "$1" ]] || continue
    local call
    for call in "${words[@]:1}"; do
      [[ $call == "*" || $call == "$2" ]] && return 0
    done
  done
  return 1
}

found=0
while IFS= read -r file; do
  # Line numbers kept, comments (// to the end of the line) dropped.
  while IFS=: read -r line call; do
    is_allowed "$file" "$call" && continue
    echo "$file:$line: calls the CUDA runtime ($call) outside device/; use device::Device (device/device.h)"
    found=$((found + 1))
  done < <(sed 's://.*$::' "$file" | grep -noE '\bcuda[A-Z][A-Za-z]*[[:space:]]*\(' | sed 's/[[:space:]]*($//')
done < <(find . -path ./device -prune -o -path ./tests -prune -o -path ./bench -prune -o \
              -path './build*' -prune -o -path ./.git -prune -o \
              -type f \( -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' -o -name '*.h' \) -print |
         sed 's:^\./::' | sort)

if ((found > 0)); then
  echo "FAIL: $found CUDA runtime call(s) outside device/"
  exit 1
fi
echo "ok: no CUDA runtime call outside device/ beyond the allowed ones"
