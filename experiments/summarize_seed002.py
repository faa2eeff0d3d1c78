#!/usr/bin/env python3
"""Markdown tables of seed 002's loopback results for experiments/README.md: per grid point the median of the
repetitions, the mean with its 95 % Student-t half-width (from aggregate.json), min-max, and the 1-minute load at
the runs' starts. Usage: experiments/summarize_seed002.py NAME [METRIC ...] (NAME: bundle_size, chain, ...)."""
import json
import statistics
import sys
from collections import defaultdict


def main(name, metrics):
    base = f"experiments/results/seed002_{name}"
    runs = json.load(open(f"{base}/runs.json"))
    agg = {tuple(p["labels"]): p for p in json.load(open(f"{base}/aggregate.json"))}
    by_point = defaultdict(list)
    for r in runs:
        by_point[tuple(r["labels"])].append(r["metrics"])
    cols = " | ".join(f"{m} median | mean ± CI95 | min–max" for m in metrics)
    print(f"| point | n | {cols} | completed | load |")
    print("|---|---|" + "---|---|---|" * len(metrics) + "---|---|")
    for labels, ms in by_point.items():
        cells = []
        for m in metrics:
            vals = [x[m] for x in ms if isinstance(x.get(m), (int, float))]
            a = agg.get(labels, {}).get("metrics", {}).get(m, {})
            mean, ci = a.get("mean"), a.get("ci95")
            if vals:
                cells.append(f"{statistics.median(vals):.0f} | {mean:.0f} ± {ci:.0f} | {min(vals):.0f}–{max(vals):.0f}"
                             if mean is not None else f"{statistics.median(vals):.0f} | — | —")
            else:
                cells.append("— | — | —")
        done = sum(x.get("completed", 0) for x in ms)
        loads = [x.get("load_start") for x in ms if isinstance(x.get("load_start"), (int, float))]
        load = f"{min(loads):.1f}–{max(loads):.1f}" if loads else "—"
        print(f"| {' / '.join(labels)} | {len(ms)} | {' | '.join(cells)} | {done:.0f}/{len(ms)} | {load} |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or ["goodput_mbps"])
