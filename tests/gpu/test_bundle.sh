#!/usr/bin/env bash
# A bundle built here, run there (tools/gpu_bundle.sh, tests/gpu/run.sh --bundle), on the emulated
# GPU: makes the bundle of an emulated build, dry-runs it (every binary and library loads from the
# bundle), really runs a few kernel tests from it with no build folder in sight, and feeds run.sh
# broken bundles. ctest gpu_script.bundle in the emulated build.
#   bash tests/gpu/test_bundle.sh BUILD_DIR    (an emulated build with its GPU tests and dsx)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(realpath "${1:?usage: tests/gpu/test_bundle.sh BUILD_DIR}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/gpu/script_checks.sh
source "$root/tests/gpu/script_checks.sh"

# expect <name> <want status> <want text> <command...>: the command's status and output.
expect() {
  local name=$1 want=$2 text=$3 status=0 out
  shift 3
  out=$(timeout 600 "$@" 2>&1) || status=$?
  judge "$name" "$want" "$text" "$status" "$out"
}

bundle=$work/bundle.tar.gz
expect "the bundle is made and its size said" 0 "(emulated; limit 60 MiB)" bash "$root/tools/gpu_bundle.sh" "$build" "$bundle"
[[ -f $bundle ]] || { echo "bundle: no bundle made, nothing more to check"; exit 1; }
tar -C "$work" -xzf "$bundle" dsx-gpu-bundle/MANIFEST
holds "the MANIFEST lists dsx with its size" "$work/dsx-gpu-bundle/MANIFEST" "file dsx "
holds "the MANIFEST lists the emulated GPU's library" "$work/dsx-gpu-bundle/MANIFEST" "file lib/libdsx_emulated_gpu.so "
expect "a bundle over its limit is refused" 1 "the bundle is over 1 MiB" \
  env DSX_BUNDLE_LIMIT_MIB=1 bash "$root/tools/gpu_bundle.sh" "$build" "$work/big.tar.gz"

run=("$root/tests/gpu/run.sh" --bundle)
expect "dry run: every binary and library loads" 0 "dry run: every binary and library loads" \
  bash "${run[@]}" "$bundle" --dry-run --results "$work/dry"
holds "dry run: dsx resolves" "$work/dry/gpu-summary.md" "| dsx | ok | - | - | - | resolves |"

# The real flow on a subset (the whole GPU suite already runs from the build folder): the bundle's
# test binary, its libraries and the stand-in CUDA runtime, from a scratch folder.
expect "a bundled test runs on the emulated GPU" 0 "| test_gpu_kernels | ok | 2 | 0 | 0 |" \
  env GTEST_FILTER='GpuAdam.*:GpuLion.*' bash "${run[@]}" "$bundle" --only '^test_gpu_kernels$' --results "$work/run"
holds "the binary's log is kept" "$work/run/logs/test_gpu_kernels.log" "[  PASSED  ] 2 tests."
holds "the summary is written to the results" "$work/run/gpu-summary.md" "| test_gpu_kernels | ok | 2 | 0 | 0 |"

# Broken bundles: each says what is wrong and what to do.
expect "a missing bundle is named" 1 "no bundle at $work/none.tar.gz: make one with tools/gpu_bundle.sh" \
  bash "${run[@]}" "$work/none.tar.gz" --dry-run --results "$work/x"
head -c 100000 "$bundle" >"$work/cut.tar.gz"
expect "a cut bundle cannot be unpacked" 1 "cannot unpack $work/cut.tar.gz" \
  bash "${run[@]}" "$work/cut.tar.gz" --dry-run --results "$work/x"
mkdir -p "$work/other/dsx-gpu-bundle" && echo hi >"$work/other/dsx-gpu-bundle/README"
tar -C "$work/other" -czf "$work/other.tar.gz" dsx-gpu-bundle
expect "a tar.gz without a MANIFEST is refused" 1 "is not a dsx GPU bundle" \
  bash "${run[@]}" "$work/other.tar.gz" --dry-run --results "$work/x"
tar -C "$work" -xzf "$bundle"
expect "the folder a bundle was unpacked in is taken too" 0 "dry run: every binary and library loads" \
  bash "${run[@]}" "$work" --dry-run --results "$work/x"
unpacked=$work/dsx-gpu-bundle
rm "$unpacked/lib/libdsx_emulated_gpu.so"
expect "a file the MANIFEST lists is missed" 1 "lacks lib/libdsx_emulated_gpu.so, which its MANIFEST lists" \
  bash "${run[@]}" "$unpacked" --dry-run --results "$work/x"
sed -i '/^file lib\/libdsx_emulated_gpu.so /d' "$unpacked/MANIFEST"
expect "a library missing from the bundle fails the dry run" 1 "| dsx | FAILED | - | - | - | cannot find: libdsx_emulated_gpu.so" \
  bash "${run[@]}" "$unpacked" --dry-run --results "$work/x"

checks_done bundle
