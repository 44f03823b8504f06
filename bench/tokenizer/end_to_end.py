"""End-to-end tokenization, the whole job a user runs, timed from process start to ids on disk:

    dsx            `dsx tokenize TEXT --tokenizer DIR --out OUT` (loads the tokenizer, reads the
                   file, encodes on every core, writes llm.c shards)
    HF             hf_tokenize_job.py: tokenizers' Tokenizer.from_file, encode_batch on all
                   threads, ids written with numpy (folders with a tokenizer.json)
    sentencepiece  spm_tokenize_job.py: the sentencepiece package's encode with num_threads
                   (folders with a tokenizer.model)

The sides run in turn, REPS rounds, so a burst of load on this shared machine hits all of them;
each figure is the fastest round. The ids of every side are hashed: "same ids" compares each peer
with dsx (documents are cut at EOS to count those that differ). Prints a Markdown table.

    python end_to_end.py --dsx BUILD/dsx --text TEXT --reps R MODEL_DIR...
"""

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def run_timed(cmd):
    """Wall seconds and CPU seconds (user + system) of a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def dsx_ids(out_dir):
    with open(os.path.join(out_dir, "tokenize.json")) as f:
        dtype = np.uint16 if json.load(f)["token_bytes"] == 2 else np.uint32
    shards = sorted(n for n in os.listdir(out_dir) if n.startswith("train_"))
    return np.concatenate([np.fromfile(os.path.join(out_dir, n), dtype=dtype, offset=1024)
                           for n in shards]).astype(np.uint32)


class Side:
    def __init__(self, name, command, read_ids):
        self.name, self.command, self.read_ids = name, command, read_ids
        self.best = self.cpu = float("inf")
        self.ids = None

    def run(self, scratch):
        out = os.path.join(scratch, self.name)
        wall, cpu = run_timed(self.command(out))
        if wall < self.best:
            self.best, self.cpu = wall, cpu
        if self.ids is None:
            self.ids = self.read_ids(out)
        shutil.rmtree(out) if os.path.isdir(out) else os.remove(out)


def sides_for(model, args):
    python = sys.executable
    sides = [Side("dsx", lambda out: [args.dsx, "tokenize", args.text, "--tokenizer", model,
                                      "--out", out], dsx_ids)]
    if os.path.exists(os.path.join(model, "tokenizer.json")):
        sides.append(Side("HF", lambda out: [python, os.path.join(HERE, "hf_tokenize_job.py"),
                                             model, args.text, out],
                          lambda out: np.fromfile(out, dtype=np.uint32)))
    if os.path.exists(os.path.join(model, "tokenizer.model")):
        sides.append(Side("sentencepiece",
                          lambda out: [python, os.path.join(HERE, "spm_tokenize_job.py"), model,
                                       args.text, out],
                          lambda out: np.fromfile(out, dtype=np.uint32)))
    return sides


def differing_documents(ours, theirs, eos):
    a = np.split(ours, np.flatnonzero(ours == eos) + 1)
    b = np.split(theirs, np.flatnonzero(theirs == eos) + 1)
    if len(a) != len(b):
        return f"{abs(len(a) - len(b))} documents more or fewer"
    return f"{sum(not np.array_equal(x, y) for x, y in zip(a, b))} of {len(a) - 1} documents differ"


def same_ids(ours, theirs, eos):
    if hashlib.sha1(ours.tobytes()).digest() == hashlib.sha1(theirs.tobytes()).digest():
        return "yes"
    return "NO (" + differing_documents(ours, theirs, eos) + ")"


def cell(side, tokens):
    return f"{side.best:.2f} s ({tokens / side.best / 1e6:.2f}M/s, {side.cpu:.1f} cpu-s)"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsx", required=True)
    parser.add_argument("--text", required=True)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("models", nargs="+")
    args = parser.parse_args()
    size = os.path.getsize(args.text)
    print(f"text: {args.text}, {size / 1e6:.1f} MB; best of {args.reps} rounds, sides in turn; "
          f"{os.cpu_count()} cores\n")
    print("| tokenizer | tokens | dsx tokenize | HF encode_batch job | dsx / HF | "
          "sentencepiece job | dsx / sentencepiece | same ids | load average |")
    print("|---|---|---|---|---|---|---|---|---|")
    scratch = tempfile.mkdtemp()
    try:
        for model in args.models:
            sides = sides_for(model, args)
            load = os.getloadavg()[0]
            for _ in range(args.reps):
                for side in sides:
                    side.run(scratch)
            load = f"{load:.1f}-{os.getloadavg()[0]:.1f}"
            ours, peers = sides[0], {s.name: s for s in sides[1:]}
            tokens = len(ours.ids)
            eos = int(ours.ids[-1])  # every document ends with EOS
            row = [os.path.basename(model.rstrip("/")), str(tokens), cell(ours, tokens)]
            checks = []
            for name in ("HF", "sentencepiece"):
                peer = peers.get(name)
                if peer is None:
                    row += ["-", "-"]
                    continue
                row += [cell(peer, tokens), f"{peer.best / ours.best:.2f}x"]
                checks.append(f"{name}: {same_ids(ours.ids, peer.ids, eos)}")
            row += ["; ".join(checks), load]
            print("| " + " | ".join(row) + " |", flush=True)
    finally:
        shutil.rmtree(scratch)


if __name__ == "__main__":
    main()
