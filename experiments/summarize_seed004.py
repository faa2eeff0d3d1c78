#!/usr/bin/env python3
"""Prints the seed 004 tables of experiments/README.md (Table IV and Fig. 8 on the LEO hop, the same without a NAK
limit, Figs 13-16 on the GEO hop with asynchronous NAKs) from the committed results' aggregate.csv, so a re-run
updates the README from its numbers and nothing is copied by hand.

Usage: python3 experiments/summarize_seed004.py [--results DIR]   (default: experiments/results next to this file)
"""
import argparse
import csv
import math
import os

# The paper's values (seed 004, Table IV and Section V.B), quoted beside ours.
PAPER_LEO = {
    420: ("25.17", "26.54", "39.62", "4394.23"),
    500: ("25.17", "26.38", "37.25", "2192.18"),
    700: ("25.11", "25.95", "34.05", "975.57"),
    1050: ("25.1", "25.62", "30.98", "277.38"),
    2100: ("25.05", "25.34", "28.04", "121.3"),
    2800: ("25.05", "25.26", "27.28", "62.42"),
    4200: ("25.05", "25.17", "26.55", "36.78"),
    8400: ("25.05", "25.11", "25.77", "33.95"),
    21000: ("25.07", "25.1", "25.35", "46.21"),
    42000: ("25.12", "25.13", "25.25", "56.97"),
}
BLOCK_KB = {420: 730.0, 500: 613.2, 700: 438.0, 1050: 292.0, 2100: 146.0, 2800: 109.5, 4200: 73.0, 8400: 36.5,
            21000: 14.6, 42000: 7.3}
BERS = ["1e-9", "1e-8", "1e-7", "1e-6"]


def load(results, name):
    with open(os.path.join(results, name, "aggregate.csv"), newline="") as f:
        return list(csv.DictReader(f))


def load_runs(results, name):
    import json
    with open(os.path.join(results, name, "runs.json")) as f:
        d = json.load(f)
    return d["runs"] if isinstance(d, dict) else d


def n_seeds(table, p, b, ber):
    return int(float(table[(p, b, ber)]["n"]))


def num(row, key):
    v = row.get(key, "")
    return float(v) if v not in ("", None) else math.nan


def pm(row, key, digits):
    return f"{num(row, key + '_mean'):.{digits}f} ± {num(row, key + '_ci95'):.{digits}f}"


def by(rows, *keys):
    return {tuple(r[k] for k in keys): r for r in rows}


def recovery(r):
    """resent / erased and time / bound of a point (`—` where undefined: nothing erased, nothing completed)."""
    if r is None:
        return "—"
    ratio, over = num(r, "resent_per_erased_mean"), num(r, "time_over_bound_mean")
    a = "—" if math.isnan(ratio) else f"{ratio:.2f}"
    b = "—" if math.isnan(over) else f"{over:.3f}"
    return f"{a} / {b}"


def recovery_table(rows, label, keys, ber_key="ber"):
    """One row per key tuple, one column per BER: resent / erased, time / bound."""
    print(f"| {label} | " + " | ".join(f"BER {b}" for b in BERS) + " |")
    print("|---" * (len(BERS) + 1) + "|")
    for k in keys:
        cells = [recovery(rows.get(k + (ber,))) for ber in BERS]
        print(f"| {k[-1]} | " + " | ".join(cells) + " |")


def leo(results):
    rows = by(load(results, "seed004_table4_leo"), "blocks", "ber")
    print("| blocks | block size | " + " | ".join(f"BER {b}: dtnkit / paper" for b in BERS) + " |")
    print("|---|---|---|---|---|---|")
    for blocks, paper in PAPER_LEO.items():
        cells = []
        for ber, p in zip(BERS, paper):
            r = rows.get((str(blocks), ber))
            if r is None:
                cells.append(f"— / {p}")
            elif num(r, "cfdp_completed_mean") < 1:
                cells.append(f"fails (NAK limit) / {p}")
            else:
                cells.append(f"{pm(r, 'cfdp_transfer_s', 2)} / {p}")
        print(f"| {blocks} | {BLOCK_KB[blocks]:.1f} kB | " + " | ".join(cells) + " |")
    print()
    print("| blocks | " + " | ".join(f"N_thr BER {b}" for b in BERS) + " |")
    print("|---|---|---|---|---|")
    for blocks in PAPER_LEO:
        cells = []
        for ber in BERS:
            r = rows.get((str(blocks), ber))
            ok = r is not None and num(r, "cfdp_completed_mean") >= 1
            cells.append(pm(r, "cfdp_nthr", 3) if ok else "—")
        print(f"| {blocks} | " + " | ".join(cells) + " |")
    print()
    print("Resent / erased File Data PDUs and transfer time / bound (docs/bench.md, \"The selective-repeat bound\"),"
          " means over the seeds (time / bound over completed transfers):")
    print()
    recovery_table(rows, "blocks", [(str(b),) for b in PAPER_LEO])


def leo_nolimit(results):
    paper = {b: PAPER_LEO[b][3] for b in PAPER_LEO}
    rows = load(results, "seed004_table4_leo_nolimit")
    print("| blocks | dtnkit, no NAK limit: time s | N_thr | retransmitted PDUs | resent / erased | time / bound "
          "| paper |")
    print("|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: int(r["blocks"])):
        b = int(r["blocks"])
        ratio, over = recovery(r).split(" / ")
        print(f"| {b} | {pm(r, 'cfdp_transfer_s', 1)} | {pm(r, 'cfdp_nthr', 3)} | "
              f"{pm(r, 'cfdp_retransmitted', 0)} | {ratio} | {over} | {paper.get(b, '—')} |")


def geo_async(results):
    rows = load(results, "seed004_geo_async")
    ps = []
    for r in rows:
        if r["p"] not in ps:
            ps.append(r["p"])
    table = by(rows, "p", "blocks", "ber")
    blocks = []
    for r in rows:
        if r["blocks"] not in blocks:
            blocks.append(r["blocks"])
    for p in ps:
        print(f"p = {p}: N_thr (failed transfers as 0), completed fraction in brackets when < 1")
        print()
        print("| blocks | " + " | ".join(f"BER {b}" for b in BERS) + " |")
        print("|---|---|---|---|---|")
        for b in blocks:
            cells = []
            for ber in BERS:
                r = table.get((p, b, ber))
                if r is None:
                    cells.append("—")
                    continue
                c = num(r, "cfdp_completed_mean")
                cell = pm(r, "cfdp_nthr0", 3)
                if c < 1:
                    cell += f" ({c * 100:.0f} %)"
                cells.append(cell)
            print(f"| {b} | " + " | ".join(cells) + " |")
        print()
    for p in ps:
        print(f"p = {p}: resent / erased File Data PDUs and transfer time / bound (with the return link's windows)")
        print()
        recovery_table(table, "blocks", [(p, b) for b in blocks])
        print()
    print("Best over the block counts (Fig. 16), with the block count and the transfer time of that point:")
    print()
    print("| p | " + " | ".join(f"BER {b}" for b in BERS) + " |")
    print("|---|---|---|---|---|")
    for p in ps:
        cells = []
        for ber in BERS:
            cand = [table[(p, b, ber)] for b in blocks if (p, b, ber) in table]
            # The highest value as printed; among equal ones the largest block count.
            best = max(cand, key=lambda r: (round(num(r, "cfdp_nthr0_mean"), 3), int(r["blocks"])))
            cells.append(f"{num(best, 'cfdp_nthr0_mean'):.3f} ({best['blocks']} blocks, "
                         f"{num(best, 'cfdp_transfer_s_mean'):.0f} s)")
        print(f"| {p} | " + " | ".join(cells) + " |")
    print()
    print("The same with N_thr computed on the time the file is delivered at the receiver instead of the sender's "
          "Finished:")
    print()
    print("| p | " + " | ".join(f"BER {b}" for b in BERS) + " |")
    print("|---|---|---|---|---|")
    # Per run: N_thr × transfer time / delivery time (same file, same rate), averaged over the seeds.
    delivered = {}
    for run in load_runs(results, "seed004_geo_async"):
        m = run["metrics"]
        t, d, n = m.get("cfdp_transfer_s"), m.get("cfdp_delivery_s"), m.get("cfdp_nthr")
        if None in (t, d, n) or not d or m.get("cfdp_completed", 0) < 1:
            continue
        delivered.setdefault(tuple(run["labels"]), []).append(n * t / d)
    for p in ps:
        cells = []
        for ber in BERS:
            cand = [(round(sum(v) / len(v), 3), int(b)) for b in blocks
                    if (v := delivered.get((p, b, ber))) and len(v) == n_seeds(table, p, b, ber)]
            cells.append(f"{max(cand)[0]:.3f} ({max(cand)[1]})" if cand else "—")
        print(f"| {p} | " + " | ".join(cells) + " |")


def e2e(results):
    rows = load(results, "seed004_e2e")
    table = by(rows, "windows", "p", "ber")
    keys = []
    for r in rows:
        if (r["windows"], r["p"]) not in keys:
            keys.append((r["windows"], r["p"]))
    print("Resent / erased File Data PDUs over both hops and transfer time / bound per completed hop (the bound does"
          " not count the wait for the LEO-GEO window), means over the seeds:")
    print()
    print("| windows | p | " + " | ".join(f"BER {b}" for b in BERS) + " |")
    print("|---|---" + "|---" * len(BERS) + "|")
    for w, p in keys:
        print(f"| {w} | {p} | " + " | ".join(recovery(table.get((w, p, ber))) for ber in BERS) + " |")
    print()
    print("End-to-end time (put at the Earth station -> file delivered at the ground), s:")
    print()
    print("| windows | p | " + " | ".join(f"BER {b}" for b in BERS) + " |")
    print("|---|---" + "|---" * len(BERS) + "|")
    runs = {}
    for run in load_runs(results, "seed004_e2e"):
        runs.setdefault(tuple(run["labels"]), []).append(run["metrics"].get("cfdp_e2e_s"))
    for w, p in keys:
        cells = []
        for ber in BERS:
            r = table.get((w, p, ber))
            v = [x for x in runs.get((w, p, ber), []) if x is not None]
            late = sum(1 for x in v if x > 8640)
            mean, ci = num(r, "cfdp_e2e_s_mean"), num(r, "cfdp_e2e_s_ci95")
            cell = f"{mean:.1f} ± {ci:.1f}" if ci < 1000 else f"{mean:.0f} ± {ci:.0f}"
            if late:
                cell += f" ({late} of {len(v)} seeds > 8640)"
            cells.append(cell)
        print(f"| {w} | {p} | " + " | ".join(cells) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    a = ap.parse_args()
    print("### Table IV / Fig. 8 (seed004_table4_leo)\n")
    leo(a.results)
    print("\n### Without a NAK limit (seed004_table4_leo_nolimit)\n")
    leo_nolimit(a.results)
    print("\n### Figs 13-16 (seed004_geo_async)\n")
    geo_async(a.results)
    print("\n### Section VI (seed004_e2e)\n")
    e2e(a.results)


if __name__ == "__main__":
    main()
