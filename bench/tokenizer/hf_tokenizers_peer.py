"""The peer of bench_tokenizer: Hugging Face tokenizers (Rust) encoding the same documents on the
same number of threads. Prints one line per API:
    peer api=encode_batch threads=N tokens=T seconds=S hash=H
seconds is the best of --reps passes (the first warms the cache, as dsx's does); hash is FNV-1a
over the ids, so bench_tokenizer can check both produced the same stream.

    python hf_tokenizers_peer.py --model DIR --text FILE --threads N --reps R
"""

import argparse
import os
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--model", required=True)
parser.add_argument("--text", required=True)
parser.add_argument("--threads", type=int, required=True)
parser.add_argument("--reps", type=int, default=3)
args = parser.parse_args()

# Read by the tokenizers crate when its thread pool starts: set before the import.
os.environ["RAYON_NUM_THREADS"] = str(args.threads)
os.environ["TOKENIZERS_PARALLELISM"] = "true" if args.threads > 1 else "false"
from tokenizers import Tokenizer  # noqa: E402


def documents(path):
    """The text's lines, each with its '\\n' (bench_tokenizer cuts the same way)."""
    text = open(path, encoding="utf-8", newline="").read()
    parts = text.split("\n")
    docs = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        docs.append(parts[-1])
    return docs


def fnv1a(batches):
    h = 0xCBF29CE484222325
    for ids in batches:
        for i in ids:
            h ^= i
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


tok = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
docs = documents(args.text)
apis = [("encode_batch", tok.encode_batch)]
if hasattr(tok, "encode_batch_fast"):
    apis.append(("encode_batch_fast", tok.encode_batch_fast))
for name, encode in apis:
    best = float("inf")
    for _ in range(args.reps):
        start = time.perf_counter()
        encodings = encode(docs)
        best = min(best, time.perf_counter() - start)
    ids = [e.ids for e in encodings]
    tokens = sum(len(i) for i in ids)
    print(f"peer api={name} threads={args.threads} tokens={tokens} seconds={best:.6f} "
          f"hash={fnv1a(ids)}")
    sys.stdout.flush()
