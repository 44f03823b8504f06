#!/usr/bin/env python3
"""Goodput under injected faults: `dsx torchrun --max_restarts` driving `dsx train` beside torchrun
--max_restarts driving DeepSpeed's own training (bench/elastic/ds_rank.py, peers venv, CPU, gloo,
DeepSpeed's save_checkpoint/load_checkpoint resume), both the quickstart's model size and ds_config,
--ranks ranks on this machine over loopback.

Each system first runs without faults to measure its step time t (seconds per step). Then
its job gets --train_s seconds of steps (steps = train_s / t) with a checkpoint every --save_s seconds
of steps, and the same fault schedule: once it has trained --every seconds since it last started
training, a rank drawn by --seed is sent the next fault of --faults (kill = kill -9, stop = SIGSTOP,
found by the rank's RANK variable). Both jobs' collectives time out after --comm_timeout seconds
(DSX_COMM_TIMEOUT; DeepSpeed's init_distributed timeout), which is how a stopped rank is noticed.
A "node" fault takes a node away for good: with it in --faults, each job runs as two agents on this
machine (--nnodes 1:2 over c10d, --ranks / 2 ranks each; dsx's config gets train_batch_size = 16 x
--ranks, DeepSpeed's ranks --global_batch, so that both keep the global batch on one node), and the
fault kills every process of the second agent (agent and ranks, kill -9), as a machine that dies.
It prints goodput = steps x t / wall time, the steps redone per fault (last step seen before the
fault - the step resumed from) and the time from the fault to the first step after the resume.
Not CI: it needs a built dsx and the peers venv (bench/peers/venv.sh).
Usage: python3 bench/elastic/bench_goodput.py --dsx build/dsx --venv .venv-peers [--ranks 2]
                                             [--faults kill,stop,node]
"""
import argparse
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESUMED = re.compile(r"resumed from (?:\S*global_step|step )(\d+)")


class Job:
    """A launcher per "node" (one, or two agents of an elastic job), each started in a session of its
    own; threads timestamp the step and resume lines. Node 0's launcher is the job's (rank 0 is there)."""

    def __init__(self, argvs, env, log_path, step_pattern):
        self.marker = "GOODPUT_BENCH_JOB=%d.%d" % (os.getpid(), time.monotonic_ns())
        key, value = self.marker.split("=")
        self.steps, self.resumes, self.step_pattern = [], [], re.compile(step_pattern)
        self.start = time.monotonic()
        self.log = open(log_path, "w")
        self.procs, self.readers = [], []
        for node, argv in enumerate(argvs):
            node_env = dict(env, **{key: value, "GOODPUT_BENCH_NODE": "%s.%d" % (value, node)})
            proc = subprocess.Popen(argv, env=node_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    start_new_session=True, text=True)
            self.procs.append(proc)
            self.readers.append(threading.Thread(target=self._read, args=(proc,), daemon=True))
            self.readers[-1].start()
            if node == 0 and len(argvs) > 1:
                time.sleep(1)  # node 0 serves the rendezvous and so has group rank 0
        self.proc = self.procs[0]

    def take_node_away(self, node):
        """Kills every process of `node` (its launcher and ranks) with SIGKILL, as a machine that dies."""
        tag = "GOODPUT_BENCH_NODE=%s.%d" % (self.marker.split("=")[1], node)
        for pid in [int(n) for n in os.listdir("/proc") if n.isdigit() and tag in environ(int(n))]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _read(self, proc):
        for line in proc.stdout:
            now = time.monotonic()
            self.log.write(line)
            self.log.flush()
            m = self.step_pattern.search(line)
            if m:
                self.steps.append((now, int(m.group(1))))
            m = RESUMED.search(line)
            if m:
                self.resumes.append((now, int(m.group(1))))

    def rank_pid(self, rank):
        """The pid of the process that is rank `rank` (its parent is not a rank), or 0."""
        found = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                env = environ(int(name))
                if self.marker in env and "RANK=%d" % rank in env:
                    found[int(name)] = parent(int(name))
        return next((pid for pid, ppid in found.items() if ppid not in found), 0)

    def leftovers(self):
        return [int(n) for n in os.listdir("/proc") if n.isdigit() and self.marker in environ(int(n))]

    def finish(self, timeout):
        try:
            code = self.proc.wait(timeout=max(1, timeout))
        except subprocess.TimeoutExpired:
            code = "timed out"
        wall = time.monotonic() - self.start
        for proc in self.procs:  # the other nodes end with node 0's rendezvous, or were taken away
            try:
                proc.wait(timeout=1 if code == "timed out" else 30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # the session we started
        for reader in self.readers:
            reader.join(10)
        left = self.leftovers()
        for pid in left:  # ours by the marker; continued first in case one is stopped
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        self.log.close()
        return code, wall, len(left)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environ(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return f.read().decode(errors="replace").split("\0")
    except OSError:
        return []


def parent(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0


def wait_until(predicate, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def step_time(steps):
    """Seconds per step over the run's last 90%: the lines come through a pipe in bursts, so single
    gaps say nothing, a long span does."""
    (t0, s0), (t1, s1) = steps[len(steps) // 10], steps[-1]
    return (t1 - t0) / (s1 - s0)


def inject(job, schedule, victims, args):
    """Runs the fault schedule; returns one (kind, rank, steps redone, seconds to training) per fault.
    A "node" fault takes the last node away for good (rank: its first rank); rank faults after it
    go to the ranks that remain."""
    results = []
    if not wait_until(lambda: job.steps, args.start_timeout):
        return results
    training_since = job.steps[0][0]
    live_ranks = args.ranks
    for kind, rank in zip(schedule, victims):
        rank = args.ranks // 2 if kind == "node" else rank % live_ranks
        if not wait_until(lambda: time.monotonic() - training_since >= args.every and
                          job.proc.poll() is None, args.start_timeout) or job.proc.poll() is not None:
            break
        if not wait_until(lambda: (job.rank_pid(rank) or 0) > 0, 20):
            break
        pid = job.rank_pid(rank)
        last_step, resumes_before = job.steps[-1][1], len(job.resumes)
        fault_time = time.monotonic()
        if kind == "node":
            job.take_node_away(len(job.procs) - 1)
            live_ranks -= args.ranks // 2
        else:
            os.kill(pid, signal.SIGKILL if kind == "kill" else signal.SIGSTOP)

        def training_again():
            if len(job.resumes) <= resumes_before:
                return job.proc.poll() is not None  # ended (its restarts ran out): stop waiting
            resumed_at = job.resumes[resumes_before][0]
            return any(t > resumed_at for t, _ in job.steps[-5:])

        if not wait_until(training_again, args.comm_timeout + args.start_timeout) or \
                len(job.resumes) <= resumes_before:
            results.append((kind, rank, None, None))
            break
        resumed_at, resumed_step = job.resumes[resumes_before]
        training_since = next(t for t, _ in job.steps if t > resumed_at)
        results.append((kind, rank, last_step - resumed_step, training_since - fault_time))
    return results


def run_system(name, make_argv, env, pattern, work, schedule, victims, args, calib_steps):
    """Calibration without faults, then the faulted job. Returns the row's figures."""
    calib = Job(make_argv(os.path.join(work, name + "-calib"), calib_steps, calib_steps, "calib"), env,
                os.path.join(work, name + "-calib.log"), pattern)
    code, _, _ = calib.finish(args.start_timeout + 120)
    if code != 0 or len(calib.steps) < 20:
        sys.exit("%s: the run without faults failed (%s); see %s-calib.log" % (name, code, os.path.join(work, name)))
    t = step_time(calib.steps)
    steps, save_every = int(args.train_s / t), max(1, int(args.save_s / t))
    job = Job(make_argv(os.path.join(work, name + "-ck"), steps, save_every, "job"), env,
              os.path.join(work, name + ".log"), pattern)
    faults = inject(job, schedule, victims, args)
    stuck = len(faults) < len(schedule) or any(f[3] is None for f in faults)
    code, wall, left = job.finish(1 if stuck else args.start_timeout + 4 * args.train_s)  # stuck: ended here
    done = job.steps[-1][1] if job.steps else 0
    return {"name": name, "t": t, "steps": steps, "save_every": save_every, "wall": wall, "code": code,
            "done": done, "left": left, "faults": faults,
            "goodput": (done if code == 0 else 0) * t / wall}


def quickstart_config(path, steps, global_batch=0):
    with open(os.path.join(HERE, "..", "..", "configs", "quickstart.json")) as f:
        config = json.loads("".join(line for line in f if not line.lstrip().startswith("//")))
    for key in ("csv_monitor", "tensorboard"):
        config.pop(key)
    config.update(wall_clock_breakdown=False, steps_per_print=1)  # a line per step, timed here
    config["scheduler"]["params"]["total_num_steps"] = steps
    if global_batch:  # elastic: the batch a re-formed world keeps
        config["train_batch_size"] = global_batch
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsx", default="build/dsx")
    ap.add_argument("--venv", default=".venv-peers", help="the peers venv (bench/peers/venv.sh)")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--faults", default="kill,kill,kill,stop",
                    help="kill, stop and node, in order; with node each job runs as two agents (--nnodes 1:2, "
                         "--ranks / 2 ranks each) and node takes the second away for good")
    ap.add_argument("--every", type=float, default=8, help="seconds of training before each fault")
    ap.add_argument("--train_s", type=float, default=45, help="seconds of steps each job has to do")
    ap.add_argument("--save_s", type=float, default=2, help="seconds of steps between checkpoints")
    ap.add_argument("--comm_timeout", type=float, default=5)
    ap.add_argument("--join_timeout", type=float, default=45,
                    help="DeepSpeed's init_distributed timeout: a restart whose gloo connect hangs fails then")
    ap.add_argument("--start_timeout", type=float, default=180,
                    help="the longest a start or a recovery may take; past it the job counts as not recovered")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", help="work (and leave the logs) in this directory")
    args = ap.parse_args()
    schedule = args.faults.split(",")
    if any(k not in ("kill", "stop", "node") for k in schedule) or schedule.count("node") > 1:
        sys.exit("--faults %s: give kill, stop and at most one node, comma-separated" % args.faults)
    nodes = 2 if "node" in schedule else 1
    if args.ranks % nodes:
        sys.exit("--ranks %d: a node fault needs an even number of ranks (two nodes)" % args.ranks)
    dsx, torchrun = os.path.abspath(args.dsx), os.path.join(os.path.abspath(args.venv), "bin", "torchrun")
    for exe in (dsx, torchrun):
        if not os.access(exe, os.X_OK):
            sys.exit("%s is missing: build dsx (cmake --build build --target dsx) and run bench/peers/venv.sh" % exe)
    rng = random.Random(args.seed)
    victims = [rng.randrange(args.ranks) for _ in schedule]
    work = args.keep or tempfile.mkdtemp(prefix="dsx-goodput-")
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", FI_TCP_IFACE="lo", FI_SOCKETS_IFACE="lo",
               DSX_COMM_TIMEOUT=str(args.comm_timeout), DS_ACCELERATOR="cpu")
    restarts = str(2 * len(schedule))  # spares: a restart may itself fail (gloo's connect), and be retried

    global_batch = 16 * args.ranks if nodes > 1 else 0

    def launch(launcher, run_id):
        """The launcher's flags, one list per node: one standalone job, or two elastic agents."""
        if nodes == 1:
            return [[launcher, "torchrun", "--standalone"] if launcher == dsx else [launcher, "--standalone"]]
        port = str(free_port())
        flags = ["--nnodes", "1:2", "--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:" + port, "--rdzv_id",
                 run_id]
        # Node 0 serves the rendezvous (the node taken away is the other): dsx's first agent binds the
        # endpoint, started a second ahead; torchrun is told, its agents' start-up takes longer.
        return [([launcher, "torchrun"] + flags if launcher == dsx else
                 [launcher] + flags + ["--rdzv_conf", "is_host=%d" % (node == 0)]) for node in range(nodes)]

    def dsx_argv(ck, steps, save_every, run_id):
        config = quickstart_config(ck + ".json", steps, global_batch)
        program = ["--nproc_per_node", str(args.ranks // nodes), "--max_restarts", restarts,
                   "--no_python", dsx, "train", "--deepspeed_config", config, "--steps", str(steps),
                   "--save_interval", str(save_every), "--save", ck, "--eval_interval", "0", "--samples", "0",
                   "--progress", "plain"]
        return [node + program for node in launch(dsx, run_id)]

    def ds_argv(ck, steps, save_every, run_id):
        program = ["--nproc_per_node", str(args.ranks // nodes), "--max_restarts", restarts,
                   os.path.join(HERE, "ds_rank.py"), "--steps", str(steps), "--save_interval", str(save_every),
                   "--save", ck, "--comm_timeout", str(args.comm_timeout), "--join_timeout", str(args.join_timeout),
                   "--global_batch", str(global_batch)]
        return [node + program for node in launch(torchrun, run_id)]

    rows = [run_system("dsx", dsx_argv, env, r"\] step=(\d+),", work, schedule, victims, args, 2000),
            run_system("torchrun + DeepSpeed", ds_argv, env, r"^step (\d+)$", work, schedule, victims, args, 200)]
    print_table(rows, schedule, victims, args, work)


def print_table(rows, schedule, victims, args, work):
    print("%d ranks on this machine, faults %s on ranks %s, one every %g s of training; %g s of steps per job, "
          "a checkpoint every %g s of steps; comm timeout %g s; logs in %s\n"
          % (args.ranks, args.faults, ",".join(map(str, victims)), args.every, args.train_s, args.save_s,
             args.comm_timeout, work))
    print("| | step time | steps (save every) | wall | goodput | steps redone per fault | fault -> training "
          "again, s (kill -9) | (SIGSTOP) | (node gone) | exit, ranks left |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        redone = [f[2] for f in r["faults"] if f[2] is not None]
        kill = [f[3] for f in r["faults"] if f[0] == "kill" and f[3] is not None]
        stop = [f[3] for f in r["faults"] if f[0] == "stop" and f[3] is not None]
        node = [f[3] for f in r["faults"] if f[0] == "node" and f[3] is not None]
        stuck = next((i for i, f in enumerate(r["faults"]) if f[3] is None), None)
        print("| %s | %.2f ms | %d (%d) | %.1f s | %.1f%% | %s | %s | %s | %s | %s, %d |"
              % (r["name"], r["t"] * 1e3, r["steps"], r["save_every"], r["wall"], 100 * r["goodput"],
                 ", ".join(map(str, redone)) or "-", ", ".join("%.1f" % s for s in kill) or "-",
                 ", ".join("%.1f" % s for s in stop) or "-", ", ".join("%.1f" % s for s in node) or "-",
                 r["code"] if stuck is None else "%s (no training within %g s of fault %d; ended here)"
                 % (r["code"], args.comm_timeout + args.start_timeout, stuck + 1), r["left"]))
    a, b = rows
    mean = lambda r: statistics.mean([f[3] for f in r["faults"] if f[3] is not None] or [float("nan")])
    print("| ratio dsx / peer | | | | %.2fx | | mean %.2fx (lower is better) | | | |"
          % (a["goodput"] / b["goodput"] if b["goodput"] else float("inf"), mean(a) / mean(b)))


if __name__ == "__main__":
    main()
