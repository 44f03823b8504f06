#!/usr/bin/env python3
"""torchrun as the oracle for `dsx torchrun`.

Runs each case below twice on this machine, once with PyTorch's torchrun and once with
`dsx torchrun`, with the same flags and a probe script that records every rank's environment
and arguments; then compares, rank by rank, the variables torchrun gives its workers, the
arguments, and the exit status. Values that are random by design (free ports, UUID run ids,
temporary paths) are compared by kind. Two-node cases start two agents on loopback.

Peers only, never CI: run it with the python of the peers venv, or tools/compat/torchrun_compat.sh.
  python tools/compat/torchrun_compat.py --dsx build/dsx [--verbose]
Prints one line per case and difference; exit status 1 when a difference is not in DELIBERATE.
"""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

VARS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
        "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
        "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE",
        "TORCHELASTIC_SIGNALS_TO_HANDLE", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "OMP_NUM_THREADS",
        "CUDA_VISIBLE_DEVICES", "TORCHELASTIC_ERROR_FILE"]

# variable -> why dsx differs on purpose (docs/launch.md lists the same).
DELIBERATE = {
    "TORCHELASTIC_USE_AGENT_STORE": "dsx agents serve no c10d TCPStore to the ranks: rank 0 hosts the ranks' store "
                                    "at MASTER_ADDR:MASTER_PORT, which torch's env:// does when the value is not True",
    "MASTER_ADDR": "dsx gives the address group rank 0's agent reached the rendezvous from, never a name "
                   "(torchrun: 'localhost' or the host name)",
    "TORCHELASTIC_ERROR_FILE": "dsx writes per-rank files only with --log_dir (torchrun makes a temporary directory "
                               "for every run)",
    "exit status": "dsx exits with the failing rank's exit code, as `dsx launch` and DeepSpeed do, and 2 on a usage "
                   "error as every dsx command (torchrun: 1 for both)",
    "OMP_NUM_THREADS": "a value above the CPUs this machine gives the process is clamped to their number, by every "
                       "dsx process (docs/launch.md); torchrun passes it on",
}

PROBE = """import json, os, sys
out = os.environ["COMPAT_OUT"]
with open(os.path.join(out, "rank%s.json" % os.environ["RANK"]), "w") as f:
    json.dump({"env": dict(os.environ), "argv": sys.argv[1:]}, f)
fail = os.environ.get("COMPAT_FAIL_RANK")
if fail == os.environ["RANK"] and int(os.environ["TORCHELASTIC_RESTART_COUNT"]) < int(os.environ["COMPAT_FAIL_UNTIL"]):
    sys.exit(3)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cases(probe, module_dir):
    """(name, [flags of each agent], environment, script words)"""
    port = "{port}"
    script = [probe, "x", "--y=1"]
    static2 = ["--nnodes", "2", "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port", port]
    c10d2 = ["--nnodes=2", "--nproc-per-node=2", "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:" + port,
             "--rdzv-id=job7"]
    return [
        ("defaults, 2 ranks", [["--nproc_per_node", "2"]], {}, script),
        ("--standalone, dashed, role, restarts", [["--standalone", "--nproc-per-node=3", "--role", "trainer",
                                                   "--max-restarts", "2"]], {}, script),
        ("static 1 node with --master_port", [["--nnodes", "1", "--nproc_per_node", "2", "--master_port", port]], {},
         script),
        ("PET_ variables", [[]], {"PET_NPROC_PER_NODE": "2", "PET_MAX_RESTARTS": "1", "PET_STANDALONE": "1"}, script),
        ("OMP_NUM_THREADS and CUDA_VISIBLE_DEVICES inherited", [["--nproc_per_node", "2"]],
         {"OMP_NUM_THREADS": "3", "CUDA_VISIBLE_DEVICES": "4,5"}, script),
        ("nproc_per_node cpu", [["--nproc_per_node", "cpu", "--standalone"]], {}, script),
        ("-m module", [["--nproc_per_node", "1", "-m"]], {"PYTHONPATH": module_dir}, ["compat_probe", "z"]),
        ("rank 1 fails once, --max_restarts 1", [["--nproc_per_node", "2", "--max_restarts", "1"]],
         {"COMPAT_FAIL_RANK": "1", "COMPAT_FAIL_UNTIL": "1"}, script),
        ("rank 1 always fails, --max_restarts 1", [["--nproc_per_node", "2", "--max_restarts", "1"]],
         {"COMPAT_FAIL_RANK": "1", "COMPAT_FAIL_UNTIL": "9"}, script),
        ("2 nodes static by hand", [static2 + ["--node_rank", "0"], static2 + ["--node_rank", "1"]], {}, script),
        ("2 nodes c10d", [c10d2, c10d2], {}, script),
        ("bad: --nnodes 2:1", [["--nnodes", "2:1"]], {}, script),
        ("bad: -m with --no_python", [["-m", "--no_python"]], {}, script),
    ]


def run(launcher, agents, env, script, out):
    port = str(free_port())
    procs = []
    for flags in reversed(agents):  # the hosting node last, as a real cluster does not guarantee order
        words = launcher + [w.replace("{port}", port) for w in flags] + script
        procs.append(subprocess.Popen(words, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    codes = [p.wait(timeout=120) for p in procs]
    ranks = {}
    for name in sorted(os.listdir(out)):
        with open(os.path.join(out, name)) as f:
            ranks[name] = json.load(f)
    return max(codes), ranks


def kind(var, value, flags):
    """The comparable form of a value: random ones by what they are."""
    if value is None:
        return "(unset)"
    if var == "MASTER_PORT" and value not in flags:
        return "<free port>" if value != "29500" else value
    if var == "MASTER_PORT":
        return "--master_port"
    if var == "TORCHELASTIC_RUN_ID" and re.fullmatch(r"[0-9a-f-]{36}", value):
        return "<uuid>"
    if var == "TORCHELASTIC_ERROR_FILE":
        return re.sub(r"^.*/(attempt_\d+/\d+/error.json)$", r".../\1", value) if value else ""
    return value


def compare(name, agents, a, b, verbose, seen):
    (code_a, ranks_a), (code_b, ranks_b) = a, b
    flags = [w for agent in agents for w in agent]
    diffs = []
    if (code_a == 0) != (code_b == 0) or (code_a and code_b and code_a != code_b):
        diffs.append(("exit status", str(code_a), str(code_b)))
    if sorted(ranks_a) != sorted(ranks_b):
        diffs.append(("ranks started", ",".join(ranks_a), ",".join(ranks_b)))
    for rank in sorted(set(ranks_a) & set(ranks_b)):
        ea, eb = ranks_a[rank]["env"], ranks_b[rank]["env"]
        for var in VARS:
            va, vb = kind(var, ea.get(var), flags), kind(var, eb.get(var), flags)
            if va != vb:
                diffs.append((rank[:-5] + " " + var, va, vb))
        if ranks_a[rank]["argv"] != ranks_b[rank]["argv"]:
            diffs.append((rank[:-5] + " argv", str(ranks_a[rank]["argv"]), str(ranks_b[rank]["argv"])))
    unexplained = 0
    print(f"{name}: {'same' if not diffs else str(len(diffs)) + ' difference(s)'}")
    for what, va, vb in diffs:
        var = what.split(" ", 1)[-1]
        key = var
        reason = DELIBERATE.get(what) or DELIBERATE.get(key) or DELIBERATE.get(var)
        unexplained += reason is None
        said = key in seen and not verbose
        line = f"  {what}: torchrun {va!r}, dsx {vb!r}" + ("" if said else f"  [deliberate: {reason}]" if reason else "  [UNEXPLAINED]")
        print(line)
        seen.add(key)
    return unexplained


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsx", default="build/dsx")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    torchrun = [sys.executable, "-m", "torch.distributed.run"]
    dsx = [os.path.abspath(args.dsx), "torchrun"]
    work = tempfile.mkdtemp(prefix="torchrun_compat_")
    probe = os.path.join(work, "compat_probe.py")
    with open(probe, "w") as f:
        f.write(PROBE)
    unexplained = 0
    seen = set()  # deliberate differences already explained above
    try:
        for name, agents, extra, script in cases(probe, work):
            results = []
            for launcher in (torchrun, dsx):
                out = os.path.join(work, "out")
                shutil.rmtree(out, ignore_errors=True)
                os.makedirs(out)
                env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES")}
                env.update(extra, COMPAT_OUT=out, PYTHON_EXEC=sys.executable, FI_TCP_IFACE="lo")
                results.append(run(launcher, agents, env, script, out))
            unexplained += compare(name, agents, results[0], results[1], args.verbose, seen)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{unexplained} unexplained difference(s)")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
