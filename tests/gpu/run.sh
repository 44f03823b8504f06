#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU: checks the driver against the CUDA runtime and
# that CUDA sees a device, builds dsx's GPU tests and benchmarks with CUDA, runs every GPU test
# binary (tests/gpu/test_gpu_*) and benchmark (bench/*/bench_gpu_*), and prints a table.
#
#   bash tests/gpu/run.sh [build-dir]          configure + build (default build-gpu), then run
#   bash tests/gpu/run.sh --no-build build-dir run binaries built elsewhere
#   bash tests/gpu/run.sh --bundle FILE         run a bundle of tools/gpu_bundle.sh: no compiler,
#                                               CMake or Debian libraries needed
#   bash tests/gpu/run.sh --bundle FILE --dry-run   unpack it and check that every binary and
#                                               library loads (the NVIDIA ones may be missing)
# Options: --only REGEX runs only the binaries whose name matches; --results DIR (bundle mode;
# default $OUT, else ./gpu-results) gets each binary's log and the summary table as they are
# written, so a run cut short still leaves what it did.
#
# Exit status: 0 when no test failed (skips are reported, not failures: a test that needs two
# GPUs skips on a one-GPU machine); 1 a test, the configure or the build failed; 2 no GPU (no
# nvidia-smi, or CUDA sees no device); 3 the driver is too old for the CUDA runtime.
# Building needs the libraries of tools/setup.sh: installed, or prepared as .debs by
# tests/gpu/prepare.sh on a machine with Debian's mirrors (docs/gpu.md, "Running the GPU tests").
# env: JOBS (build jobs, default nproc), CUDA_ARCH (e.g. 90; default the project's 80;90),
# DSX_GPU_DEPS (the prepared .debs; default gpu-deps/, used when it holds any); time limits in
# seconds: DSX_TEST_TIMEOUT (each test binary, default 150), DSX_BENCH_TIMEOUT (each benchmark,
# default 60), DSX_RUN_BUDGET (all binaries together, default 330, so that a run fits in 6 minutes;
# binaries left when it is spent are listed as not run, and fail the run).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

say() { echo "tests/gpu/run.sh: $*"; }
die() { # die <exit status> <message>
  echo "tests/gpu/run.sh: $2" >&2
  exit "$1"
}
build_it=1 bundle="" dry_run=0 only="" results="" build_arg=""
while (($# > 0)); do
  case $1 in
    --no-build) build_it=0 ;;
    --bundle) bundle=${2:?--bundle needs a file (tools/gpu_bundle.sh makes one)} && shift ;;
    --dry-run) dry_run=1 ;;
    --only) only=${2:?--only needs a regular expression} && shift ;;
    --results) results=${2:?--results needs a folder} && shift ;;
    -*) die 1 "unknown option $1 (see the head of tests/gpu/run.sh)" ;;
    *) build_arg=$1 ;;
  esac
  shift
done
[[ $dry_run == 0 || -n $bundle ]] || die 1 "--dry-run checks a bundle: give --bundle FILE"
jobs=${JOBS:-$(nproc)}
if [[ -n $bundle ]]; then
  build_it=0
  results=$(realpath -m "${results:-${OUT:-$PWD/gpu-results}}")
  mkdir -p "$results/logs"
  log=$results/gpu-run.log
  summary=$results/gpu-summary.md
  bench_out=$results/gpu-bench.md
else
  build=$(realpath -m "${build_arg:-$root/build-gpu}")
  # A toolkit on PATH wins; else the usual install place.
  if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then export PATH=/usr/local/cuda/bin:$PATH; fi
  mkdir -p "$build"
  log=$build/gpu-run.log
  summary=$build/gpu-summary.md
  bench_out=$build/gpu-bench.md
fi
: >"$log"
: >"$summary"
: >"$bench_out"

# row <step> <result> <passed> <failed> <skipped> <detail>: one line of the summary table,
# written at once so that a run cut short keeps it.
row() { printf '| %s | %s | %s | %s | %s | %s |\n' "$@" >>"$summary"; }
# table_head <title>: the summary's title and header, before its first row.
table_head() { printf '## %s\n\n| step | result | passed | failed | skipped | detail |\n|---|---|---|---|---|---|\n' "$1" >>"$summary"; }
# at_least <needed> <have>: version <have> is <needed> or newer.
at_least() { [[ $(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1) == "$1" ]]; }

# --- 0. A bundle: unpacked, its C/C++ runtimes and NVIDIA libraries found (tests/gpu/bundle_run.sh)
if [[ -n $bundle ]]; then
  # shellcheck source=tests/gpu/bundle_run.sh disable=SC2154 # it sets bundle_dir, bundle_kind, manifest
  source "$here/bundle_run.sh"
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/dsx-bundle.XXXXXX")
  trap 'rm -rf "$scratch"' EXIT
  bundle_unpack "$bundle" "$scratch"
  build=$bundle_dir
  say "bundle $bundle ($bundle_kind, $(sed -n 's/^commit //p' "$manifest")), results in $results"
  if [[ $dry_run == 1 ]]; then
    table_head "dsx GPU bundle, dry run: does every binary and library load?"
  else
    table_head "dsx GPU run ($bundle_kind bundle)"
  fi
  bundle_runtimes
  bundle_nvidia_libraries
  # Tests that start dsx find the bundle's, not the path the build baked in.
  export DSX_EXE=$build/dsx
  if [[ $dry_run == 1 ]]; then
    status=0
    bundle_dry_run || status=1
    cat "$summary"
    if ((status == 0)); then say "dry run: every binary and library loads"; else say "dry run: some files cannot load (above)"; fi
    exit "$status"
  fi
fi

# --- 1. Driver against runtime, and the device count, once, before anything is built --------
# The oldest driver branch that runs each CUDA major version (NVIDIA's compatibility table).
min_driver_for() { case $1 in 13) echo 580 ;; 12) echo 525 ;; 11) echo 450 ;; *) echo 0 ;; esac; }

# smi <args>: nvidia-smi, which can hang on a GPU in a bad state.
smi() { timeout 60 nvidia-smi "$@"; }
check_driver() {
  if ! command -v nvidia-smi >/dev/null || ! smi -L >>"$log" 2>&1; then
    die 2 "no NVIDIA GPU visible (nvidia-smi missing or nvidia-smi -L failed); run this on a GPU machine."
  fi
  gpu=$(smi --query-gpu=name --format=csv,noheader | head -n 1)
  gpus=$(smi -L | grep -c '^GPU ' || true)
  driver=$(smi --query-gpu=driver_version --format=csv,noheader | head -n 1)
  driver_cuda=$(smi | grep -oE 'CUDA Version: *[0-9]+\.[0-9]+' | grep -oE '[0-9.]+$' || true)
  say "driver $driver (supports CUDA ${driver_cuda:-?}), $gpus GPU(s): $gpu"
  [[ -n $bundle ]] || table_head "dsx GPU run on $gpu"

  # The runtime: the toolkit that builds here (nvcc), or the one the probe was built with (a
  # bundle's).
  probe=$build/cuda_probe
  toolkit=""
  if [[ -z $bundle ]] && command -v nvcc >/dev/null; then
    toolkit=$(nvcc --version | grep -oE 'release [0-9]+\.[0-9]+' | grep -oE '[0-9.]+$' || true)
    say "CUDA toolkit $toolkit ($(command -v nvcc))"
    if [[ $build_it == 1 || ! -x $probe ]]; then
      nvcc -o "$probe" "$root/tests/gpu/cuda_probe.cu" >>"$log" 2>&1 || die 1 "cannot build the CUDA probe; see $log"
    fi
  fi
  [[ -x $probe ]] || die 1 "no nvcc on PATH and no $probe from an earlier build: cannot ask CUDA for its devices"
  probed=$(timeout 60 "$probe" 2>&1) && probe_ok=1 || probe_ok=0
  echo "cuda_probe: $probed" >>"$log"
  runtime=$(grep -oE 'runtime=[0-9]+' <<<"$probed" | grep -oE '[0-9]+$' || echo 0)
  runtime_text="$((runtime / 1000)).$((runtime % 1000 / 10))"
  say "CUDA runtime $runtime_text (cuda_probe: $probed)"

  runtime_major=$((runtime / 1000))
  [[ -n $toolkit ]] && runtime_major=${toolkit%%.*}
  needed=$(min_driver_for "$runtime_major")
  driver_major=${driver%%.*}
  [[ $driver_major =~ ^[0-9]+$ ]] || driver_major=0
  if ((driver_major < needed)) || grep -q cudaErrorInsufficientDriver <<<"$probed"; then
    die 3 "driver $driver is too old for the CUDA $runtime_major runtime, which needs driver >= $needed (this driver
    supports CUDA ${driver_cuda:-?}): every CUDA call would fail and every GPU test would skip. Use a machine
    with driver >= $needed, or put a CUDA toolkit the driver supports (<= ${driver_cuda:-its version}) first on PATH."
  fi
  if [[ -n $toolkit && -n $driver_cuda ]] && ! at_least "$toolkit" "$driver_cuda"; then
    say "note: toolkit $toolkit is newer than the driver's CUDA $driver_cuda; minor-version compatibility applies (code built for the GPU runs, PTX that the driver must compile may not)"
  fi
  if ((probe_ok == 0)); then
    die 2 "CUDA sees no device although nvidia-smi lists $gpus ($probed). Check CUDA_VISIBLE_DEVICES
    ('${CUDA_VISIBLE_DEVICES-unset}') and that /dev/nvidia* are accessible."
  fi
  devices=$(grep -oE 'devices=[0-9]+' <<<"$probed" | grep -oE '[0-9]+$')
  row "driver $driver, CUDA runtime $runtime_text" ok - - - "$devices device(s) visible to CUDA: $gpus x $gpu"
}
if [[ ${bundle_kind:-} == emulated ]]; then
  row "emulated GPU (tests/emulated_gpu)" ok - - - "no driver: the bundle carries the stand-in CUDA runtime"
else
  check_driver
fi

# --- 2. Libraries: prepared .debs (tests/gpu/prepare.sh), and cuDNN/NCCL where CUDA lacks them --
cmake_args=()
deps=${DSX_GPU_DEPS:-$root/gpu-deps}
if [[ -z $bundle ]] && compgen -G "$deps/*.deb" >/dev/null; then
  # shellcheck source=tests/gpu/gpu_deps.sh disable=SC1091
  source "$root/tests/gpu/gpu_deps.sh"
  # The packages were built for one glibc and libstdc++; this machine's must be as new.
  have_glibc=$(getconf GNU_LIBC_VERSION | grep -oE '[0-9.]+$')
  need_glibc=$(sed -n 's/^needs-glibc //p' "$deps/MANIFEST" 2>/dev/null || true)
  libstdcxx=$(readlink -f "$(${CXX:-c++} -print-file-name=libstdc++.so.6 2>/dev/null || echo none)")
  have_glibcxx=$(grep -aoE 'GLIBCXX_3\.4\.[0-9]+' "$libstdcxx" 2>/dev/null | sort -uV | tail -n 1 | sed 's/GLIBCXX_//' || true)
  need_glibcxx=$(sed -n 's/^needs-glibcxx //p' "$deps/MANIFEST" 2>/dev/null || true)
  if [[ -n $need_glibc ]] && ! at_least "$need_glibc" "$have_glibc"; then
    die 1 "the libraries in $deps need glibc >= $need_glibc, this machine has $have_glibc: prepare them on an
  older Debian (tests/gpu/prepare.sh), or install them here (tools/setup.sh)"
  fi
  if [[ -n $need_glibcxx && -n $have_glibcxx ]] && ! at_least "$need_glibcxx" "$have_glibcxx"; then
    die 1 "the libraries in $deps need libstdc++ GLIBCXX_$need_glibcxx, the compiler's ($libstdcxx) has
  GLIBCXX_$have_glibcxx: use a newer g++ (CXX), or prepare the libraries on an older Debian"
  fi
  t0=$SECONDS
  gpu_deps_use "$deps" "$build/deps-prefix" >>"$log" 2>&1 || die 1 "cannot unpack $deps into $build/deps-prefix; see $log"
  row "libraries from ${deps#"$root"/}" ok - - - "$(find "$deps" -name '*.deb' | wc -l) packages in $build/deps-prefix, $((SECONDS - t0)) s"
fi
# cuDNN and NCCL: the toolkit's folders, else the copies Python's nvidia-* wheels carry (an image
# with PyTorch has them), whose libraries have only versioned names (libcudnn.so.9).
if [[ -z $bundle ]] && command -v nvcc >/dev/null; then
  cuda_home=$(dirname "$(dirname "$(command -v nvcc)")")
  for lib in cudnn nccl; do
    if [[ -z $(find -L "$cuda_home/include" "$cuda_home/targets" -maxdepth 3 -name "$lib.h" 2>/dev/null | head -n 1) ]]; then
      wheel=$(python3 -c "import nvidia.$lib as m; print(list(m.__path__)[0])" 2>/dev/null || true)
      so=$(find "$wheel/lib" -maxdepth 1 -name "lib$lib.so*" 2>/dev/null | sort | head -n 1)
      [[ -n $wheel && -f $wheel/include/$lib.h && -n $so ]] || continue
      upper=$(tr '[:lower:]' '[:upper:]' <<<"$lib")
      cmake_args+=(-D"${upper}_INCLUDE_DIR=$wheel/include" -D"${upper}_LIBRARY=$so")
      export LD_LIBRARY_PATH=$wheel/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      say "$lib from Python's wheel: $so"
    fi
  done
fi

# --- 3. Build ---------------------------------------------------------------------------------
if [[ $build_it == 1 ]]; then
  [[ -n ${CUDA_ARCH:-} ]] && cmake_args+=(-DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH")
  # A fresh build folder: Ninja where there is one (CUDA images often have ninja but no make).
  if [[ ! -f $build/CMakeCache.txt ]] && command -v ninja >/dev/null; then cmake_args+=(-G Ninja); fi
  t0=$SECONDS
  if ! cmake -S "$root" -B "$build" -DDSX_CUDA=ON -DCMAKE_BUILD_TYPE=Release "${cmake_args[@]}" >>"$log" 2>&1; then
    tail -n 30 "$log"
    die 1 "configure failed (missing libraries? bash tools/setup.sh, or tests/gpu/prepare.sh; docs/gpu.md)"
  fi
  # Only the GPU tests and benchmarks (and the libraries they link), not the whole project.
  # Makefiles list targets as "... name" under help; Ninja's help lists none, its -t targets does.
  if [[ -f $build/build.ninja ]]; then listing=$(ninja -C "$build" -t targets all); else listing=$(cmake --build "$build" --target help); fi
  mapfile -t targets < <(sed -nE 's/^(\.\.\. )?((test_gpu|bench_gpu)_[A-Za-z0-9_]+)(:.*)?$/\2/p' <<<"$listing" | sort -u)
  ((${#targets[@]} > 0)) || die 1 "configure made no test_gpu_*/bench_gpu_* targets (is CUDA on? see $log)"
  if ! cmake --build "$build" -j"$jobs" --target "${targets[@]}" >>"$log" 2>&1; then
    grep -E 'error' "$log" | head -n 30
    die 1 "build failed; full log: $log"
  fi
  row "build (${#targets[@]} targets)" ok - - - "$((SECONDS - t0)) s"
fi

# --- 4. Tests and benchmarks, each under its own time limit and all under one budget -----------
# skipped_tests <gtest output>: "Suite.Case (reason)" for each skipped test, on one line.
skipped_tests() {
  awk '/: Skipped$/ {getline reason; next}
       /^\[  SKIPPED \] [A-Za-z0-9_\/.]+ \(/ {printf "%s%s (%s)", sep, $4, reason; sep = "; "}' <<<"$1"
}
test_limit=${DSX_TEST_TIMEOUT:-150} bench_limit=${DSX_BENCH_TIMEOUT:-60} budget=${DSX_RUN_BUDGET:-330}
logs=$(dirname "$log")/logs
mkdir -p "$logs"
run_start=$SECONDS
total_passed=0 total_failed=0 total_skipped=0 not_run=0

# may_run <binary>: whether to run it (--only, the budget, its libraries); sets limit. A binary
# that cannot run gets its row here.
may_run() {
  local name missing cudnn_only=1 lib
  name=$(basename "$1")
  [[ -f $1 && -x $1 ]] || return 1
  [[ -z $only || $name =~ $only ]] || return 1
  local left=$((budget - (SECONDS - run_start)))
  limit=$((left < $2 ? left : $2))
  if ((left < 5)); then
    not_run=$((not_run + 1))
    row "$name" "NOT RUN" - - - "the run's budget (DSX_RUN_BUDGET=$budget s) is spent"
    return 1
  fi
  [[ -n $bundle ]] || return 0
  missing=$(unloadable "$1")
  [[ -n $missing ]] || return 0
  for lib in $missing; do [[ $lib == libcudnn* ]] || cudnn_only=0; done
  if ((cudnn_only)); then
    total_skipped=$((total_skipped + 1))
    row "$name" skipped - - - "needs $missing, which this image lacks (cuDNN is optional: install cuDNN 9, or pip install nvidia-cudnn-cu12)"
  else
    total_failed=$((total_failed + 1))
    row "$name" FAILED - - - "cannot start: this image lacks $missing (see cuda-libraries.txt)"
  fi
  return 1
}

shopt -s nullglob
for test in "$build"/tests/gpu/test_gpu_*; do
  may_run "$test" "$test_limit" || continue
  name=$(basename "$test")
  t0=$SECONDS
  status=0
  # Straight to its own log, so that a run cut short keeps what the binary said.
  timeout -k 10 "$limit" "$test" --gtest_color=no >"$logs/$name.log" 2>&1 || status=$?
  out=$(cat "$logs/$name.log")
  echo "$out" >>"$log"
  passed=$(grep -oE '^\[  PASSED  \] [0-9]+' <<<"$out" | grep -oE '[0-9]+$' || echo 0)
  skipped=$(grep -oE '^\[  SKIPPED \] [0-9]+' <<<"$out" | grep -oE '[0-9]+$' || echo 0)
  # gtest lists each failed test once more at the end, without its time: those lines.
  failures=$(grep -E '^\[  FAILED  \] [A-Za-z_0-9/.]+$' <<<"$out" | sed 's/\[  FAILED  \] //' | tr '\n' ' ' || true)
  failures=${failures% }
  nfailed=$(wc -w <<<"$failures")
  total_passed=$((total_passed + passed))
  total_skipped=$((total_skipped + skipped))
  if ((status == 124 || status == 137)); then
    total_failed=$((total_failed + 1))
    row "$name" FAILED "$passed" "$nfailed" "$skipped" "timed out after $limit s (DSX_TEST_TIMEOUT); its log: logs/$name.log"
  elif [[ $status != 0 ]]; then
    nfailed=$((nfailed > 0 ? nfailed : 1))
    total_failed=$((total_failed + nfailed))
    row "$name" FAILED "$passed" "$nfailed" "$skipped" "${failures:-exit status $status}"
  elif [[ $skipped != 0 ]]; then
    row "$name" "ok, $skipped skipped" "$passed" 0 "$skipped" "$((SECONDS - t0)) s; skipped: $(skipped_tests "$out")"
  else
    row "$name" ok "$passed" 0 0 "$((SECONDS - t0)) s"
  fi
done

for bench in "$build"/bench/*/bench_gpu_*; do
  may_run "$bench" "$bench_limit" || continue
  name=$(basename "$bench")
  t0=$SECONDS
  status=0
  timeout -k 10 "$limit" "$bench" >>"$bench_out" 2>"$logs/$name.log" || status=$?
  cat "$logs/$name.log" >>"$log"
  if [[ $status == 0 ]]; then
    row "$name" ok - - - "$((SECONDS - t0)) s"
  elif ((status == 124 || status == 137)); then
    total_failed=$((total_failed + 1))
    row "$name" FAILED - - - "timed out after $limit s (DSX_BENCH_TIMEOUT)"
  else
    total_failed=$((total_failed + 1))
    row "$name" FAILED - - - "exit status $status; see logs/$name.log"
  fi
  echo >>"$bench_out"
done

cat "$summary"
echo
cat "$bench_out"
echo "(full log: $log)"
echo "summary: $total_passed passed, $total_failed failed, $total_skipped skipped$( ((not_run == 0)) || echo ", $not_run binaries not run (time budget)")"
((total_failed == 0 && not_run == 0)) || exit 1
