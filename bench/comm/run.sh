#!/usr/bin/env bash
# Allreduce on this machine with 2 ranks: dsx over shm (with buffers from its shared host memory,
# and with ordinary ones) and over tcp, beside the peers a user
# would pick instead - OpenMPI's MPI_Allreduce over its shared memory (vader) and over tcp, and
# torch.distributed's gloo - and one core's
# memcpy bandwidth, measured in the same run; prints a markdown table with the ratios.
# Benchmark-only dependencies (OpenMPI, the peers venv with torch) are installed here, never by CI.
# The peers run round-robin ROUNDS times and each figure is the median over the rounds, so a
# burst of load on a shared machine hits everyone alike and no single round decides.
# Usage: bash bench/comm/run.sh [build-dir]     (env MIN_BYTES MAX_BYTES ITERS WARMUP ROUNDS)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-${DSX_BUILD_DIR:-build}}
dsx="$build/dsx"
[[ -x $dsx ]] || { echo "run.sh: $dsx not found - build first (bash tools/build.sh)" >&2; exit 1; }
MIN=${MIN_BYTES:-4096}
MAX=${MAX_BYTES:-67108864}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
ROUNDS=${ROUNDS:-3}

out=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$out"
}
trap cleanup EXIT

if ! dpkg-query -W -f='${Status}' libopenmpi-dev 2>/dev/null | grep -q "install ok installed" ||
   ! command -v mpirun >/dev/null; then
  echo "run.sh: installing OpenMPI (benchmark only)" >&2
  sudo_cmd=(); [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends openmpi-bin libopenmpi-dev >&2
fi
mpicc -O2 -o "$out/mpi_allreduce" bench/comm/mpi_allreduce.c
cc -O2 -o "$out/memcpy_bw" bench/comm/memcpy_bw.c
cc -O2 -o "$out/core_round_trip" bench/comm/core_round_trip.c
python=$(bash bench/peers/venv.sh | tail -n 1)

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Two ranks of `dsx bench comm`, started by hand with the torchrun environment, on lo only.
# `shared`: 1 - buffers from dsx's shared host memory, as the engine's gradients (read in place
# by the peer over shm); 0 - ordinary memory, what an arbitrary caller passes.
run_dsx() {
  local provider=$1 shared=$2 name=$3 round=$4 port
  port=$(free_port)
  pids=()
  for rank in 0 1; do
    RANK=$rank LOCAL_RANK=$rank WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo OMP_NUM_THREADS=1 \
      "$dsx" bench comm --op allreduce -b "$MIN" -e "$MAX" -n "$ITERS" -w "$WARMUP" --blocking 1 \
      --backend ofi --provider "$provider" --shared-buffers "$shared" >"$out/$name.$round.$rank" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  pids=()
  mv "$out/$name.$round.0" "$out/$name.$round"
}

# OpenMPI over one byte transfer layer: vader (its shared memory, the peer of dsx over shm) or
# tcp on lo (the peer of dsx over tcp).
run_mpi() {
  local btl=$1 name=$2 round=$3
  shift 3
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    mpirun -np 2 --oversubscribe --bind-to none --mca btl "self,$btl" --mca oob_tcp_if_include lo "$@" \
    "$out/mpi_allreduce" "$MIN" "$MAX" "$ITERS" "$WARMUP" >"$out/$name.$round" || echo "run.sh: OpenMPI ($btl) run failed" >&2
}

load_at_start=$(cut -d' ' -f1 /proc/loadavg)
trip_at_start=$("$out/core_round_trip")
for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round/$ROUNDS: dsx shm (shared and ordinary buffers), dsx tcp, OpenMPI vader, OpenMPI tcp, torch gloo, memcpy" >&2
  # Which of the two goes first alternates: on a VM the first run after the peers' is sometimes
  # slower for small sizes, and neither should always be the one that pays it.
  if (( round % 2 )); then
    run_dsx shm 1 dsx_shm "$round"
    run_dsx shm 0 dsx_shm_ordinary "$round"
  else
    run_dsx shm 0 dsx_shm_ordinary "$round"
    run_dsx shm 1 dsx_shm "$round"
  fi
  run_dsx tcp 1 dsx_tcp "$round"
  run_mpi vader mpi "$round"
  run_mpi tcp mpi_tcp "$round" --mca btl_tcp_if_include lo
  "$python" bench/comm/gloo_allreduce.py "$MIN" "$MAX" "$ITERS" "$WARMUP" "$(free_port)" >"$out/gloo.$round" ||
    echo "run.sh: gloo run failed" >&2
  "$out/memcpy_bw" "$MIN" "$MAX" >"$out/memcpy.$round"
done

echo
echo "Allreduce, 2 ranks on one host ($(nproc) cores, load average $load_at_start at the start," \
  "$(cut -d' ' -f1 /proc/loadavg) at the end; core-to-core round trip $trip_at_start ns at the start," \
  "$("$out/core_round_trip") ns at the end)," \
  "$ITERS iterations after $WARMUP warm-up, median of $ROUNDS rounds; $(date -u +%Y-%m-%d)"
echo
python3 bench/comm/compare.py "$out" "$ROUNDS"
