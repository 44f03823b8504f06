"""The per-phase table of bench/models/run_cpu_step_phases.sh: rank 0's trace (steps 3-5), each
phase's milliseconds per step beside its limit measured on this machine in the same run.

GEMM phases (a layer's or the head's forward/backward): the limit is the phase's GEMM FLOPs at the
fastest cblas_sgemm rate the run measured (step_limits.c, one thread, fastest call, over the step's
shapes and a 1024^3 square); what lies beyond it is the rest of the span (layernorm, GELU, softmax,
cross-entropy, residual adds, copies) and GEMMs running below that rate.
Memory phases: the limit is the bytes the phase must move at the rate one core copies memory
(step_limits.c, fastest of its copies of 64 MiB: a copy reads and writes, so bytes moved = 2 x bytes copied).
Waits: the limit is 0, since overlap_comm can hide the communication behind backward.
--bf16 (the job with ds_config bf16): a GEMM phase's limit is the time oneDNN's bf16 matmul alone
takes at each of the phase's shapes (step_limits.c's bf16gemm lines: the classifier in dsx's
vocabulary slices, the attention's products too, though dsx still runs those in fp32).
"""
import argparse
import json
import re
import statistics
from collections import defaultdict

GEMMS = {
    "forward, layers": ("fwd_qkv", "fwd_attn_proj", "fwd_fc", "fwd_mlp_proj", "fwd_scores", "fwd_context"),
    "forward head (classifier, cross-entropy)": ("fwd_classifier", "fwd_classifier_tail"),
    "backward head": ("bwd_dx_classifier", "bwd_dw_classifier", "bwd_dx_classifier_tail", "bwd_dw_classifier_tail"),
    "backward, layers": tuple(f"bwd_{d}_{lin}" for d in ("dx", "dw") for lin in ("qkv", "attn_proj", "fc", "mlp_proj"))
    + ("bwd_attention_TxhdxT", "bwd_attention_TxTxhd"),
}


def phase_spans(trace_path):
    """Rank 0's training-thread spans, per step. The machine is shared, so a span's wall time
    includes time the rank was not scheduled; each span name's best occurrence, times how often it
    occurs per step, estimates the phase on a quiet machine (the median is printed beside it)."""
    events = json.load(open(trace_path))
    events = events["traceEvents"] if isinstance(events, dict) else events
    threads = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    spans = [e for e in events if e.get("ph") == "X"]
    steps = sum(1 for e in spans if e["name"].startswith("ProfilerStep#"))
    durations = defaultdict(list)
    partition = 0
    for e in spans:
        found = re.match(r"allgather .*\(fp32, (\d+) elements per rank\)", e["name"])
        if found:
            partition = int(found.group(1))
        if threads.get(e["tid"]) != "training":
            continue
        name = "step" if e["name"].startswith("ProfilerStep#") else e["name"]
        durations[name].append(e["dur"] / 1e3)
    best, median = defaultdict(float), defaultdict(float)
    for name, ds in durations.items():
        key = re.sub(r" layer \d+$", ", layers", name)  # "forward layer 3" -> "forward, layers"
        best[key] += min(ds) * len(ds) / steps
        median[key] += statistics.median(ds) * len(ds) / steps
    return best, median, steps, partition


def key_of(phase):
    return "forward head" if phase.startswith("forward head") else phase


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("limits")
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--accumulation", type=int, required=True)
    ap.add_argument("--bf16", action="store_true", help="limits are bf16 matmul times per shape")
    a = ap.parse_args()
    ms, median, steps, partition = phase_spans(a.trace)
    sgemm = {}
    for line in open(a.limits):
        name, seconds, rate, count = line.split()
        sgemm[name] = (float(seconds), float(rate), int(count))
    copy_gbs = sgemm.pop("memcpy")[1]
    moved_per_ms = 2 * copy_gbs * 1e6  # bytes read + written per millisecond
    # The FLOP limit: the fastest sgemm of the run, any shape (a busy machine slows single shapes).
    peak = max(rate for _, rate, _ in sgemm.values())
    rows = []
    for phase, names in GEMMS.items():
        names = [n for n in names if n in sgemm]
        flops = sum(sgemm[n][2] * sgemm[n][0] * sgemm[n][1] * 1e9 for n in names)
        if a.bf16:  # each shape at its own bf16 matmul time
            limit = sum(sgemm[n][2] * sgemm[n][0] for n in names) * 1e3
            what = f"{flops / 1e9:.1f} GFLOP at oneDNN's bf16 matmul times at these shapes"
        else:
            limit = flops / peak / 1e6
            what = f"{flops / 1e9:.1f} GFLOP at the run's best sgemm rate"
        if phase.startswith("forward head"):  # the logits written, then read by the softmax
            logits = 2 * 4.0 * a.rows * a.vocab * a.accumulation
            limit += logits / moved_per_ms
            what += f" + {logits / 1e6:.0f} MB of logits"
        rows.append((phase, ms.get(key_of(phase), 0.0), limit, what))
    for phase, moved in (("optimizer", 28.0 * partition), ("overflow check and gradient norm", 4.0 * partition),
                         ("parameters after step", 8.0 * partition)):
        rows.append((phase, ms.get(phase, 0.0), moved / moved_per_ms, f"{moved / 1e6:.0f} MB moved at memcpy speed"))
    for phase in ("wait for gradient reductions", "sum across ranks", "loss allreduce", "data"):
        rows.append((phase, ms.get(phase, 0.0), 0.0, "0: hidden behind compute" if phase != "data" else "0"))
    print(f"rank 0, {steps} steps traced: step {ms['step']:.1f} ms best, {median['step']:.1f} ms median;"
          f" best {'bf16 matmul' if a.bf16 else 'sgemm'} rate (1 thread) {peak:.1f} GFLOP/s; memcpy {copy_gbs:.2f} GB/s copied (one core,"
          f" 64 MiB); ZeRO partition {partition} elements")
    print("| phase | ms/step, best | ms/step, median | limit ms/step | limit / best | beyond the limit, ms/step | limit |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for phase, measured, limit, what in rows:
        share = f"{limit / measured:.2f}" if measured > 0 else "-"
        print(f"| {phase} | {measured:.1f} | {median.get(key_of(phase), 0.0):.1f} | {limit:.1f} | {share} |"
              f" {measured - limit:.1f} | {what} |")
    print(f"| sum of the rows | {sum(r[1] for r in rows):.1f} | | {sum(r[2] for r in rows):.1f} | | | |")
    per_gemm = sorted(sgemm.items(), key=lambda kv: -kv[1][0] * kv[1][2])
    print(f"{'bf16 matmul' if a.bf16 else 'sgemm'} alone per step (ms) and GFLOP/s by shape: " +
          ", ".join(f"{n} {s * c * 1e3:.0f} ms @ {g:.0f}" for n, (s, g, c) in per_gemm if c))


if __name__ == "__main__":
    main()
