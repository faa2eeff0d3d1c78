#!/usr/bin/env python3
"""Fits seed 002's work-rate model R(w) = w / (Oc + Ol * w) (thesis eq. 4.1) to a bundle-size sweep.

1/R = Oc * (1/w) + Ol is linear in 1/w; least squares over every run on relative errors (w = bundle payload bytes,
R = goodput in bytes/s) gives Oc (seconds per bundle) and Ol (seconds per byte; 1/Ol is the large-bundle ceiling).
Usage: experiments/fit_seed002.py [--max-bundle BYTES] [experiments/results/seed002_bundle_size/runs.json ...]
Only bundles up to --max-bundle (default 2000000, the thesis's range 1 KB - 2000 KB) enter the fit: the model has
no term for what makes very large bundles slower again. Prints one markdown row per series (the axis other than
bundle_bytes, if any).
"""
import json
import math
import sys
from collections import defaultdict


def fit(points):
    """Least squares on relative errors: minimises sum(((Oc / w + Ol) * R - 1) ** 2), i.e. 1/R = Oc/w + Ol with
    every run weighted by its own scale (plain least squares on 1/R lets the slowest, smallest bundles decide
    Ol). Returns Oc, Ol and the median absolute relative error of the fitted R."""
    a11 = a12 = a22 = b1 = b2 = 0.0
    for w, r in points:
        x1, x2 = r / w, r
        a11 += x1 * x1
        a12 += x1 * x2
        a22 += x2 * x2
        b1 += x1
        b2 += x2
    det = a11 * a22 - a12 * a12
    oc = (b1 * a22 - b2 * a12) / det
    ol = (a11 * b2 - a12 * b1) / det
    errs = sorted(abs(w / (oc + ol * w) / r - 1) for w, r in points)
    return oc, ol, errs[len(errs) // 2]


def main(paths, max_bundle):
    print("| file | series | runs | Oc (µs per bundle) | Ol (ns per byte) | 1/Ol (Gb/s) | median abs. error of R |")
    print("|---|---|---|---|---|---|---|")
    for path in paths:
        runs = json.load(open(path))
        groups = defaultdict(list)
        for r in runs:
            m = r["metrics"]
            g = m.get("goodput_mbps")
            if g is None or not isinstance(g, (int, float)) or not math.isfinite(g) or g <= 0:
                continue
            if m.get("completed", 1) != 1:
                continue
            labels = r["labels"]
            # The bundle size is the label of the axis named bundle_bytes: the last axis in the seed 002 files.
            w = float(labels[-1])
            if w > max_bundle:
                continue
            series = "/".join(labels[:-1]) or "-"
            groups[series].append((w, g * 1e6 / 8))
        for series, pts in groups.items():
            oc, ol, err = fit(pts)
            ceil = 8 / ol / 1e9 if ol > 0 else float("inf")
            print(f"| {path.split('/')[-2]} | {series} | {len(pts)} | {oc * 1e6:.2f} | {ol * 1e9:.3f} | {ceil:.2f} | {100 * err:.0f} % |")


if __name__ == "__main__":
    args = sys.argv[1:]
    limit = 2e6
    if args[:1] == ["--max-bundle"]:
        limit, args = float(args[1]), args[2:]
    main(args or ["experiments/results/seed002_bundle_size/runs.json",
                  "experiments/results/seed002_udpcl/runs.json"], limit)
