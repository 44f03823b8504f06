#!/usr/bin/env bash
# Is the GEMM library the gap? The GPT-2 CPU benchmark's three classifier SGEMMs (1024 x 384 x
# 50304) through dsx's GEMM (OpenBLAS) beside torch.mm (MKL) on the same threads, same run. Where
# the environment forces OPENBLAS_CORETYPE, dsx also runs with OpenBLAS's own kernel choice.
# usage: bash bench/models/run_classifier_gemm.sh [build-dir]   (env THREADS, REPEAT)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
threads=${THREADS:-$(nproc)}
repeat=${REPEAT:-5}
[[ -f $build/CMakeCache.txt ]] || cmake -S "$root" -B "$build" >/dev/null
cmake --build "$build" --target bench_classifier_gemm -j"$threads" >/dev/null
python=$(bash "$root/bench/peers/venv.sh" | tail -n 1)
results=$(mktemp)
trap 'rm -f "$results"' EXIT
OMP_NUM_THREADS=$threads "$build/bench/models/bench_classifier_gemm" "$repeat" >>"$results"
if [[ -n ${OPENBLAS_CORETYPE:-} ]]; then
  env -u OPENBLAS_CORETYPE OMP_NUM_THREADS="$threads" "$build/bench/models/bench_classifier_gemm" "$repeat" |
    sed 's/"impl": "dsx"/"impl": "dsx, OPENBLAS_CORETYPE unset"/' >>"$results"
fi
"$python" "$root/bench/models/classifier_gemm_peer.py" --threads "$threads" --repeat "$repeat" 2>/dev/null >>"$results"
"$python" - "$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(f"GPT-2 tied classifier SGEMMs, 1024 tokens x 384 channels x 50304 vocabulary, fp32, {rows[0]['threads']} threads")
for r in rows:
    if "blas" in r and r["product"].startswith("logits"):
        print(f"{r['impl']}: {r['blas']}")
ours = {r["product"]: r for r in rows if r["impl"] == "dsx"}
print(f"| {'product':<22} | {'implementation':<30} | {'time (s)':>9} | {'GFLOP/s':>8} | {'dsx / this':>10} |")
print(f"|{'-'*24}|{'-'*32}|{'-'*11}|{'-'*10}|{'-'*12}|")
for r in rows:
    print(f"| {r['product']:<22} | {r['impl']:<30} | {r['s']:>9.4f} | {r['gflops']:>8.1f} |"
          f" {ours[r['product']]['gflops'] / r['gflops']:>9.2f}x |")
PY
