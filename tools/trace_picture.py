#!/usr/bin/env python3
"""A picture of a dsx trace: every rank's tracks as rows of coloured spans, as an SVG file.

For documentation and for machines without a browser; Perfetto or chrome://tracing show the
same files interactively. Usage: tools/trace_picture.py DIR OUT.svg [--steps N]
(DIR: the directory of `dsx train --profile DIR`; --steps: how many traced steps to draw).
"""
import argparse
import glob
import html
import json
import os
import re
import sys

COLOURS = {"user_annotation": "#d0d0d0", "phase": "#8fb3de", "layer": "#4c78a8", "wait": "#e45756",
           "comm": "#f58518", "progress": "#54a24b", "zero": "#b279a2", "checkpoint": "#9d755d"}
ROW, GAP, LEFT, WIDTH = 18, 4, 190, 1100


def load(path):
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    tracks = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    spans = [e for e in events if e["ph"] == "X"]
    return tracks, spans


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=1)
    a = ap.parse_args()
    files = sorted(glob.glob(os.path.join(a.dir, "rank*.trace.json")),
                   key=lambda p: int(re.search(r"rank(\d+)", os.path.basename(p)).group(1)))
    if not files:
        sys.exit(f"{a.dir}: no rank<r>.trace.json files")
    ranks = [(int(re.search(r"rank(\d+)", os.path.basename(p)).group(1)), *load(p)) for p in files]
    steps = sorted((s for _, _, spans in ranks[:1] for s in spans if s["name"].startswith("ProfilerStep#")), key=lambda s: s["ts"])
    if not steps:
        sys.exit("no step spans in the traces")
    begin = steps[0]["ts"]
    end = steps[min(a.steps, len(steps)) - 1]["ts"] + steps[min(a.steps, len(steps)) - 1]["dur"]
    scale = WIDTH / (end - begin)
    rows = []  # (label, [(span, depth)], depth count)
    for rank, tracks, spans in ranks:
        for tid, name in sorted(tracks.items()):
            row = sorted((s for s in spans if s["tid"] == tid and s["ts"] < end and s["ts"] + s["dur"] > begin),
                         key=lambda s: (s["ts"], -s["dur"]))
            if not row:
                continue
            placed, open_ends = [], []
            for s in row:  # a span inside another goes one level down
                while open_ends and open_ends[-1] <= s["ts"]:
                    open_ends.pop()
                placed.append((s, len(open_ends)))
                open_ends.append(s["ts"] + s["dur"])
            rows.append((f"rank {rank}: {name}", placed, 1 + max(d for _, d in placed)))
    height = sum(levels for _, _, levels in rows) * ROW + len(rows) * GAP + 60
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + 20}" height="{height}" '
           'font-family="sans-serif" font-size="11">', '<rect width="100%" height="100%" fill="white"/>']
    y = 20
    for label, placed, levels in rows:
        out.append(f'<text x="4" y="{y + 13}">{html.escape(label)}</text>')
        for s, depth in placed:
            x = LEFT + max(0.0, s["ts"] - begin) * scale
            w = max(0.5, min(s["ts"] + s["dur"], end) - max(s["ts"], begin)) * scale
            colour = COLOURS.get(s["cat"], "#bab0ac")
            out.append(f'<rect x="{x:.1f}" y="{y + depth * ROW}" width="{w:.1f}" height="{ROW - 1}" '
                       f'fill="{colour}" stroke="white" stroke-width="0.3"><title>{html.escape(s["name"])} '
                       f'({s["dur"] / 1000:.3f} ms)</title></rect>')
        y += levels * ROW + GAP
    y += 14
    out.append(f'<text x="4" y="{y}">{(end - begin) / 1000:.2f} ms shown. Colours: ' +
               ", ".join(f'<tspan fill="{c}">{k}</tspan>' for k, c in COLOURS.items()) + "</text>")
    out.append("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"{a.out}: {len(rows)} tracks, {(end - begin) / 1000:.2f} ms")


if __name__ == "__main__":
    main()
