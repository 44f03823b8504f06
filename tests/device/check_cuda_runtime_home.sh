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

# The sources to check: git's tracked files where there is a checkout (so nothing a build or a
# dependency cache left in the tree), else every file; never device/, tests/ or bench/.
sources() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -- '*.cpp' '*.cu' '*.cuh' '*.h'
  else
    find . -path './.*' -prune -o -type f \( -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' -o -name '*.h' \) -print |
      sed 's:^\./::'
  fi | grep -vE '^(device|tests|bench|build[^/]*)/' | sort
}

found=0
while IFS=: read -r file line call; do
  call=${call%%[[:space:](]*}
  # A call in a comment (// to the end of the line) does not count.
  code=$(sed -n "${line}p" "$file" | sed 's://.*$::')
  grep -qE "\b$call[[:space:]]*\(" <<<"$code" || continue
  is_allowed "$file" "$call" && continue
  echo "$file:$line: calls the CUDA runtime ($call) outside device/; use device::Device (device/device.h)"
  found=$((found + 1))
done < <(sources | xargs -r -d '\n' grep -nHoE '\bcuda[A-Z][A-Za-z]*[[:space:]]*\(' --)

if ((found > 0)); then
  echo "FAIL: $found CUDA runtime call(s) outside device/"
  exit 1
fi
echo "ok: no CUDA runtime call outside device/ beyond the allowed ones"
