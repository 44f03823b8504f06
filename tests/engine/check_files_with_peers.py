#!/usr/bin/env python3
"""Reads the files dsx writes with the real tools users will open them with (not part of CI):

  * the TensorBoard event file, with TensorBoard's own EventAccumulator;
  * the csv_monitor files, compared byte for byte with what DeepSpeed's csvMonitor writes for the
    same events;
  * the checkpoint files, with safetensors.torch.load_file (values and metadata).

Usage:  python tests/engine/check_files_with_peers.py BUILD_DIR
        (python: the one `bash bench/peers/venv.sh` prints on its last line)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    writer = os.path.join(build, "tests", "engine", "peer_sample_files")
    out = tempfile.mkdtemp(prefix="dsx-peers-")
    events = json.loads(subprocess.run([writer, out], check=True, capture_output=True, text=True).stdout)
    failures = 0

    # 1. TensorBoard reads our event file.
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    tb_dir = os.path.join(out, "tensorboard", "job")
    acc = EventAccumulator(tb_dir)
    acc.Reload()
    names = sorted({e[0] for e in events})
    if sorted(acc.Tags()["scalars"]) != names:
        print("FAIL tensorboard tags:", acc.Tags()["scalars"]); failures += 1
    import numpy as np
    for name in names:
        want = [(e[2], np.float32(e[1])) for e in events if e[0] == name]
        got = [(s.step, np.float32(s.value)) for s in acc.Scalars(name)]
        if got != want:
            print("FAIL tensorboard values of", name, got[:3], want[:3]); failures += 1
    print(f"tensorboard {__import__('tensorboard').__version__} EventAccumulator: "
          f"{len(names)} tags, {sum(len(acc.Scalars(n)) for n in names)} scalars read back "
          f"from {os.listdir(tb_dir)[0].split('.')[0]}.out.tfevents.* -> {'OK' if failures == 0 else 'FAIL'}")

    # 2. DeepSpeed's csvMonitor, fed the same events, writes the same bytes.
    import deepspeed.comm as dist
    dist.get_rank = lambda: 0  # single process, no process group
    from deepspeed.monitor.csv_monitor import csvMonitor
    config = types.SimpleNamespace(enabled=True, output_path=os.path.join(out, "deepspeed_csv"), job_name="job")
    monitor = csvMonitor(config)
    for i in range(0, len(events), 4):
        monitor.write_events([tuple(e) for e in events[i:i + 4]])
    ours_dir, theirs_dir = os.path.join(out, "csv", "job"), os.path.join(out, "deepspeed_csv", "job")
    ours, theirs = sorted(os.listdir(ours_dir)), sorted(os.listdir(theirs_dir))
    same = ours == theirs and all(
        open(os.path.join(ours_dir, f), "rb").read() == open(os.path.join(theirs_dir, f), "rb").read() for f in ours)
    if not same:
        print("FAIL csv files differ:", ours, theirs); failures += 1
    print(f"deepspeed {__import__('deepspeed').__version__} csvMonitor: {len(theirs)} files, "
          f"byte-identical to dsx's -> {'OK' if same else 'FAIL'}")

    # 3. safetensors loads our checkpoint files.
    import safetensors
    from safetensors import safe_open
    from safetensors.torch import load_file
    ckpt = os.path.join(out, "checkpoint", "global_step7")
    ok = open(os.path.join(out, "checkpoint", "latest")).read() == "global_step7"
    for rank in range(2):
        path = os.path.join(ckpt, f"zero_pp_rank_{rank}_mp_rank_00_optim_states.safetensors")
        tensors = load_file(path)
        master = tensors["master.0"].numpy()
        want = np.array([7 * 1000 + rank * 100 + (i % 97) * 0.25 for i in range(1000)], dtype=np.float32)
        ok &= bool((master == want).all()) and tensors["counters"].tolist() == [7, rank]
        with safe_open(path, "pt") as f:
            ok &= json.loads(f.metadata()["dsx"]) == {"step": 7, "rank": rank}
    model = load_file(os.path.join(ckpt, "mp_rank_00_model_states.safetensors"))
    ok &= bool((model["wte.weight"].numpy() == 7.0).all())
    if not ok:
        failures += 1
    print(f"safetensors {safetensors.__version__} load_file: 3 checkpoint files, values and metadata "
          f"-> {'OK' if ok else 'FAIL'}")
    if failures:
        print("files kept in", out)
    else:
        shutil.rmtree(out)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
