#!/usr/bin/env python3
"""Loads dsx's rank traces with TensorBoard's PyTorch profiler plugin (torch-tb-profiler), its own
reader and generator, as `tensorboard --logdir` would: every rank a worker of one run.

Run in the peers venv (bench/peers/venv.sh); never in CI.
Usage: python check_with_tensorboard.py TRACE_DIR   (TRACE_DIR: of `dsx train --profile TRACE_DIR`)
Prints, per rank, the steps the plugin found and the views it can show; exits 1 when a rank's
trace does not load or shows no steps.
"""
import glob
import os
import re
import shutil
import sys
import tempfile

from torch_tb_profiler import io
from torch_tb_profiler.profiler.loader import RunLoader


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    files = sorted(glob.glob(os.path.join(sys.argv[1], "rank*.trace.json")))
    if not files:
        sys.exit(f"{sys.argv[1]}: no rank<r>.trace.json")
    with tempfile.TemporaryDirectory() as logdir:
        run_dir = os.path.join(logdir, "dsx_run")
        os.makedirs(run_dir)
        for f in files:  # the plugin's file names: <worker>.pt.trace.json
            worker = re.search(r"(rank\d+)", os.path.basename(f)).group(1)
            shutil.copy(f, os.path.join(run_dir, worker + ".pt.trace.json"))
        cache_dir = tempfile.mkdtemp()
        run = RunLoader("dsx_run", run_dir, io.Cache(cache_dir)).load()
        shutil.rmtree(cache_dir, ignore_errors=True)
        failures = 0
        print(f"{'worker':<10} {'steps found':<24} views")
        for f in files:
            worker = re.search(r"(rank\d+)", os.path.basename(f)).group(1)
            profile = run.get_profile(worker, "default")
            if profile is None:
                print(f"{worker:<10} {'(did not load)':<24} -")
                failures += 1
                continue
            overview = getattr(profile, "overview", None) or {}
            steps = [str(row[0]) for row in overview.get("steps", {}).get("rows", [])]
            views = ", ".join(v.display_name for v in profile.views)
            shown = f"{len(steps)}: {steps[0]}-{steps[-1]}" if steps else "(none)"
            print(f"{worker:<10} {shown:<24} {views}")
            failures += not steps or steps == ["0"]
        distributed = run.get_profile("All", "default")
        print("distributed view:", "yes" if distributed is not None else "no")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
