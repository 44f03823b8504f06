#!/usr/bin/env bash
# check_cuda_runtime_home.sh on made-up trees: it passes device/, tests/, comments and the allowed
# calls, and fails on a runtime call elsewhere, naming the file, line and call.
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../gpu/script_checks.sh"
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree"/device "$tree"/tests "$tree"/kernels/cuda "$tree"/comm
echo 'void f() { cudaMalloc(&p, 4); }' >"$tree/device/cuda_device.cpp"
echo 'void t() { cudaMemcpy(a, b, 4, k); }' >"$tree/tests/test_x.cpp"
echo 'void g() { check(cudaGetLastError()); }' >"$tree/kernels/cuda/launch.cuh"
printf '%s\n' '// cudaMalloc(&p, 4) in a comment' 'void h() { ncclAllReduce(a); cublasLtMatmul(b); }' >"$tree/comm/clean.cpp"

out=$(bash "$here/check_cuda_runtime_home.sh" "$tree" 2>&1)
judge "a clean tree passes" 0 "ok:" $? "$out"

printf '%s\n' 'int x;' 'void h() { cudaStreamCreate (&s); }' >"$tree/comm/dirty.cpp"
out=$(bash "$here/check_cuda_runtime_home.sh" "$tree" 2>&1)
judge "a runtime call outside device/ fails, named" 1 "comm/dirty.cpp:2: calls the CUDA runtime (cudaStreamCreate)" $? "$out"
rm "$tree/comm/dirty.cpp"

echo 'void g() { cudaMalloc(&p, 4); }' >>"$tree/kernels/cuda/launch.cuh"
out=$(bash "$here/check_cuda_runtime_home.sh" "$tree" 2>&1)
judge "an allowed file's other calls fail" 1 "kernels/cuda/launch.cuh:2: calls the CUDA runtime (cudaMalloc)" $? "$out"

checks_done check_cuda_runtime_home
