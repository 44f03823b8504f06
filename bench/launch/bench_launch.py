#!/usr/bin/env python3
"""Launcher overhead and fail-fast, dsx launch beside torchrun and the deepspeed launcher.

Two cases on this machine, 4 ranks each, every launcher run the same rank program directly
(--no_python / --no-python), median of --reps runs:
  start+exit  every rank runs /bin/true: the launcher's own cost to start and reap a world.
              Floor: /bin/sh starting the same 4 processes and waiting for them.
  fail-fast   rank 0 exits 1 at once, ranks 1-3 sleep 60 s: time until the launcher has
              exited, and how many ranks it left running (each rank records its pid; leftovers
              are killed here by pid after the measurement).
Peers come from bench/peers/venv.sh (torchrun, deepspeed with DS_ACCELERATOR=cpu).
Usage: python3 bench/launch/bench_launch.py --dsx build/dsx [--reps 3]
"""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

RANKS = 4


def rank_program(kind, piddir):
    if kind == "true":
        return ["/bin/true"]
    # A script file, so that no launcher re-quotes a `sh -c` string; exec: the recorded pid is
    # the sleeping process itself.
    path = os.path.join(piddir, "rank.sh")
    with open(path, "w") as f:
        f.write('echo $$ > %s/pid.$RANK\nif [ "$RANK" = 0 ]; then exit 1; fi\nexec sleep 60\n' % piddir)
    return ["/bin/sh", path]


def commands(dsx, venv_bin, program, port):
    return {
        "dsx launch": [dsx, "launch", "-q", "--num_gpus", str(RANKS), "--no_local_rank", "--master_port", str(port)] + program,
        "torchrun": [os.path.join(venv_bin, "torchrun"), "--nproc_per_node", str(RANKS), "--master_port", str(port),
                     "--no-python"] + program,
        "deepspeed": [os.path.join(venv_bin, "deepspeed"), "--num_gpus", str(RANKS), "--no_python", "--no_local_rank",
                      "--master_port", str(port)] + program,
    }


def floor_command(program):
    words = " ".join("'%s'" % w for w in program)
    body = "; ".join("RANK=%d %s &" % (r, words) for r in range(RANKS))
    return ["/bin/sh", "-c", body + " wait"]


def leftovers(piddir):
    alive = []
    for name in os.listdir(piddir):
        if not name.startswith("pid."):
            continue
        pid = int(open(os.path.join(piddir, name)).read())
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    alive.append(pid)
        except OSError:
            pass
    return alive


def timed(cmd, env):
    start = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    return time.perf_counter() - start


def measure(name, cmd_of, kind, reps, env):
    times, left = [], 0
    for rep in range(reps):
        with tempfile.TemporaryDirectory() as piddir:
            cmd = cmd_of(rank_program(kind, piddir), 29600 + rep)
            times.append(timed(cmd, env))
            alive = leftovers(piddir)
            left = max(left, len(alive))
            for pid in alive:  # ranks this run started and its launcher left behind
                os.kill(pid, signal.SIGKILL)
    return statistics.median(times), left


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsx", required=True)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    python = subprocess.run(["bash", os.path.join(here, "..", "peers", "venv.sh")], capture_output=True, text=True,
                            check=True).stdout.strip().splitlines()[-1]
    venv_bin = os.path.dirname(python)
    env = dict(os.environ, DS_ACCELERATOR="cpu")
    env.pop("CUDA_VISIBLE_DEVICES", None)

    print("| case | dsx launch | torchrun | deepspeed | floor (sh) | torchrun / dsx | deepspeed / dsx | ranks left running (dsx, torchrun, deepspeed) |")
    print("|---|---|---|---|---|---|---|---|")
    for kind, label in (("true", "start+exit, 4 ranks"), ("fail", "fail-fast, 4 ranks")):
        results = {}
        for name in ("dsx launch", "torchrun", "deepspeed"):
            results[name] = measure(name, lambda prog, port, n=name: commands(args.dsx, venv_bin, prog, port)[n], kind,
                                    args.reps, env)
        floor = measure("floor", lambda prog, port: floor_command(prog), "true", args.reps, env)[0] if kind == "true" else None
        d, t, s = (results[n][0] for n in ("dsx launch", "torchrun", "deepspeed"))
        print("| %s | %.3f s | %.3f s | %.3f s | %s | %.1fx | %.1fx | %d, %d, %d |" % (
            label, d, t, s, "%.3f s" % floor if floor is not None else "-", t / d, s / d,
            results["dsx launch"][1], results["torchrun"][1], results["deepspeed"][1]))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
