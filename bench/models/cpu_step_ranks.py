"""Beside the per-phase table of bench/models/run_cpu_step_phases.sh: how much of each collective
phase is a rank's own work and how much is waiting for the other rank, from every rank's trace;
and, with DeepSpeed's seconds per step, the best speed-up any implementation calling this sgemm
could reach on the job.

A collective ends on every rank at about the same time, so the rank that reaches it last waits
least: its span is the phase's own work (pack, reduce, unpack; or the allgather's copy), and what
the others spend beyond it is the lateness of that rank (other work or other processes on its
core). Occurrence k of a span name is matched across ranks (every rank runs the same schedule).
"""
import argparse
import json
import os
import sys
from collections import defaultdict

from cpu_step_phases import GEMMS, phase_spans

# The spans whose collective every rank must reach, and the bytes their own work moves (multiples
# of the ZeRO partition's fp32 bytes, read + written) as dsx does it, per occurrence.
COLLECTIVE_PHASES = {
    # pack (scale and copy the bucket: 2 x 2 partitions), reduce-scatter in place (own block and the
    # peer's read, own written: 3), add into the gradient partition (3), per micro-step
    "wait for gradient reductions": 10.0,
    # the allgather's copy of the other rank's partition (2) and the zeroing of the gradients (1)
    "parameters after step": 3.0,
}


def training_spans(trace_path):
    """{span name: [duration ms, ...] in time order} of the rank's training thread, and the steps."""
    events = json.load(open(trace_path))
    events = events["traceEvents"] if isinstance(events, dict) else events
    threads = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    spans = sorted((e for e in events if e.get("ph") == "X" and threads.get(e["tid"]) == "training"),
                   key=lambda e: e["ts"])
    durations = defaultdict(list)
    for e in spans:
        durations[e["name"]].append(e["dur"] / 1e3)
    steps = sum(1 for e in spans if e["name"].startswith("ProfilerStep#"))
    return durations, steps


def own_work_table(traces, partition, copy_gbs):
    ranks = [training_spans(t) for t in traces]
    steps = ranks[0][1]
    moved_per_ms = 2 * copy_gbs * 1e6
    print("| phase (rank 0's training thread) | rank 0 ms/step, best | the last rank's own work ms/step, best |"
          " rank 0 waiting for a later rank ms/step, median | own-work limit ms/step | limit / own work |")
    print("|---|---:|---:|---:|---:|---:|")
    for phase, partitions in COLLECTIVE_PHASES.items():
        per_rank = [r[0].get(phase, []) for r in ranks]
        n = min(len(d) for d in per_rank)
        if n == 0:
            continue
        own = [min(d[k] for d in per_rank) for k in range(n)]  # the last-arriving rank's span
        late = sorted(per_rank[0][k] - own[k] for k in range(n))
        per_step = n / steps
        limit = partitions * 4.0 * partition / moved_per_ms * per_step
        own_best = min(own) * per_step
        print(f"| {phase} | {min(per_rank[0][:n]) * per_step:.1f} | {own_best:.1f} | {late[n // 2] * per_step:.1f} |"
              f" {limit:.1f} | {limit / own_best:.2f} |")


def gemm_bound(limits_path, deepspeed_seconds):
    """The step can be no shorter than its GEMMs at the best sgemm rate the run measured."""
    sgemm = {}
    for line in open(limits_path):
        name, seconds, rate, count = line.split()
        sgemm[name] = (float(seconds), float(rate), int(count))
    sgemm.pop("memcpy")
    peak = max(rate for _, rate, _ in sgemm.values())
    names = [n for phase in GEMMS.values() for n in phase if n in sgemm]  # the tails: bf16's only
    flops = sum(sgemm[n][2] * sgemm[n][0] * sgemm[n][1] * 1e9 for n in names)
    bound = flops / peak / 1e9
    print(f"GEMM bound: {flops / 1e9:.1f} GFLOP per rank and step at {peak:.1f} GFLOP/s = {bound:.3f} s/step;"
          + (f" DeepSpeed {deepspeed_seconds:.3f} s/step / {bound:.3f} s = {deepspeed_seconds / bound:.2f}x at best"
             if deepspeed_seconds else " (DS_STEP_S unset: no ratio)"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("limits")
    ap.add_argument("traces", nargs="+", help="rank0.trace.json rank1.trace.json ...")
    ap.add_argument("--deepspeed-seconds", type=float, default=0.0, help="DeepSpeed's s/step on this job")
    a = ap.parse_args()
    for path in [a.limits] + a.traces:
        if not os.path.isfile(path):
            sys.exit(f"cpu_step_ranks.py: {path} does not exist (the limits of step_limits.c, and every rank's"
                     " trace of `dsx train --profile DIR`: DIR/rank<N>.trace.json)")
    if len(a.traces) < 2:
        sys.exit("cpu_step_ranks.py: give every rank's trace (at least two) to split waits from work")
    copy_gbs = next(float(line.split()[2]) for line in open(a.limits) if line.startswith("memcpy "))
    partition = phase_spans(a.traces[0])[3]
    own_work_table(a.traces, partition, copy_gbs)
    gemm_bound(a.limits, a.deepspeed_seconds)


if __name__ == "__main__":
    main()
