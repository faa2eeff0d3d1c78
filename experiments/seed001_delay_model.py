#!/usr/bin/env python3
"""Seed 001's analytic delay model (its equation (1) and Table 1): the one-way link delay T = D_linkpath / c of the
three GEO-relayed scenarios, computed from orbital geometry, beside the paper's ranges and the delays the IP-mode
experiments (seed001_fig3_delay, _fig4_ber, _fig5_asymmetry) use.

The paper states only the formula, the paths and the resulting ranges; the altitudes, the ground station's elevation
mask and the spacing of the two GEO relays of scenario III are ours (below, printed with the table). A path's length
is the sum of its hops' straight-line distances; a hop between two satellites must clear the Earth (the line may
not pass below GRAZE_KM of altitude), a hop to the ground station must be above the elevation mask.

Writes experiments/results/seed001_table1_delay/{table.md,table.csv,provenance.json} and prints table.md.
Usage: python3 experiments/seed001_delay_model.py [--out DIR]
"""
import argparse
import csv
import json
import math
import os
import subprocess
import sys
import time

C_KM_S = 299_792.458
R_E = 6371.0  # mean Earth radius, km
H_GEO = 35_786.0
R_GEO = R_E + H_GEO
LEO_KM = (300.0, 1500.0)  # LEO altitudes considered (lowest ... highest)
MEO_KM = 20_200.0  # a GPS-like MEO (the paper's "MEO D")
ELEV_MASK_DEG = 10.0  # ground station's minimum elevation
GEO_SPACING_DEG = 120.0  # scenario III: longitude difference of GEO C and GEO A
GRAZE_KM = 100.0  # inter-satellite lines must stay above this altitude

# The paper's Table 1 (ms) and the one-way delays of our IP-mode experiments that stand for each scenario.
PAPER = {"I": (1, 80), "II": (200, 250), "III": (480, 500)}
USED = {
    "I": "1.5, 50 (Fig. 3); 50 = scenario I of Figs 4-5",
    "II": "250 (Fig. 3; scenario II of Figs 4-5)",
    "III": "500 (Fig. 3; scenario III of Figs 4-5)",
}
USED_MS = {"I": [1.5, 50.0], "II": [250.0], "III": [500.0]}


def ms(km):
    return km / C_KM_S * 1000.0


def slant_to_ground(h_km, elev_deg):
    """Distance from a ground station to a satellite at altitude h seen at elevation elev."""
    e = math.radians(elev_deg)
    r = R_E + h_km
    return math.sqrt(r * r - (R_E * math.cos(e)) ** 2) - R_E * math.sin(e)


def sat_distance(r1, r2, central_deg):
    g = math.radians(central_deg)
    return math.sqrt(r1 * r1 + r2 * r2 - 2 * r1 * r2 * math.cos(g))


def max_central_angle(r1, r2):
    """The largest central angle at which the line between two satellites clears R_E + GRAZE_KM."""
    rg = R_E + GRAZE_KM
    return math.degrees(math.acos(rg / r1) + math.acos(rg / r2))


def leo_to_geo_range(h_km):
    """(min, max) distance from a satellite at altitude h to a GEO satellite it can see."""
    r = R_E + h_km
    return R_GEO - r, sat_distance(r, R_GEO, max_central_angle(r, R_GEO))


def central_angle_for(h_km, d_km):
    """The central angle between a satellite at altitude h and a GEO satellite at which they are d apart."""
    r = R_E + h_km
    c = (r * r + R_GEO * R_GEO - d_km * d_km) / (2 * r * R_GEO)
    return math.degrees(math.acos(max(-1.0, min(1.0, c))))


def model():
    rows = []
    geo_ground = (H_GEO, slant_to_ground(H_GEO, ELEV_MASK_DEG))  # GS at the GEO's nadir ... at the mask
    # Scenario I: LEO or MEO straight to the ground station.
    lo = LEO_KM[0]  # lowest LEO overhead
    hi = slant_to_ground(MEO_KM, ELEV_MASK_DEG)  # MEO at the mask
    rows.append({
        "scenario": "I", "hops": 1, "path": "LEO E / MEO D -> GS F",
        "min_km": lo, "max_km": hi,
        "min_case": f"LEO at {LEO_KM[0]:.0f} km overhead",
        "max_case": f"MEO at {MEO_KM:.0f} km at {ELEV_MASK_DEG:.0f} deg elevation",
    })
    # Scenario II: LEO -> GEO A -> GS.
    leo_hi = leo_to_geo_range(LEO_KM[1])
    leo_lo = leo_to_geo_range(LEO_KM[0])
    meo = leo_to_geo_range(MEO_KM)
    rows.append({
        "scenario": "II", "hops": 2, "path": "LEO E / MEO D -> GEO A -> GS F",
        "min_km": leo_hi[0] + geo_ground[0], "max_km": leo_lo[1] + geo_ground[1],
        "min_case": f"LEO at {LEO_KM[1]:.0f} km below GEO A, GS at its nadir",
        "max_case": f"LEO at {LEO_KM[0]:.0f} km at the Earth's limb seen from GEO A, GS at {ELEV_MASK_DEG:.0f} deg",
        "note": f"a MEO at {MEO_KM:.0f} km below GEO A gives {ms(meo[0] + geo_ground[0]):.0f} ms",
    })
    # Scenario III: LEO -> GEO C -> GEO A -> GS; D_CA fixed by the spacing, D_AF fixed by the ground station.
    d_ca = sat_distance(R_GEO, R_GEO, GEO_SPACING_DEG)
    rows.append({
        "scenario": "III", "hops": 3, "path": "LEO E -> GEO C -> GEO A -> GS F",
        "min_km": leo_hi[0] + d_ca + geo_ground[0], "max_km": leo_lo[1] + d_ca + geo_ground[1],
        "min_case": f"GEO C and A {GEO_SPACING_DEG:.0f} deg apart ({d_ca:.0f} km), LEO at {LEO_KM[1]:.0f} km below C, "
                    "GS at A's nadir",
        "max_case": f"LEO at {LEO_KM[0]:.0f} km at the limb seen from C, GS at {ELEV_MASK_DEG:.0f} deg",
    })
    for r in rows:
        r["min_ms"], r["max_ms"] = ms(r["min_km"]), ms(r["max_km"])
        r["paper_min_ms"], r["paper_max_ms"] = PAPER[r["scenario"]]
        r["used_ms"] = USED[r["scenario"]]
        r["used_inside"] = all(r["min_ms"] <= u <= r["max_ms"] for u in USED_MS[r["scenario"]])
    # How far from the relay's nadir the LEO (lowest altitude) may be for the paper's upper values of II and III.
    for r, fixed in ((rows[1], geo_ground[0]), (rows[2], d_ca + geo_ground[0])):
        d_leo = r["paper_max_ms"] / 1000.0 * C_KM_S - fixed
        r["paper_max_leo_angle_deg"] = central_angle_for(LEO_KM[0], d_leo)
    rows[1]["paper_max_leo_angle_deg_limb"] = max_central_angle(R_E + LEO_KM[0], R_GEO)
    return rows, d_ca


def git(*args):
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def provenance(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    top = git("-C", here, "rev-parse", "--show-toplevel")
    commit = git("-C", here, "rev-parse", "HEAD")
    dirty = None
    if top:
        s = git("-C", top, "status", "--porcelain", "--untracked-files=no", "--", "experiments/seed001_delay_model.py")
        dirty = None if s is None else bool(s)
    return {"commit": commit, "dirty": dirty, "command": ["python3", "experiments/seed001_delay_model.py", *argv],
            "started_unix_s": int(time.time())}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(here, "results", "seed001_table1_delay"))
    a = ap.parse_args()
    rows, d_ca = model()
    lines = [
        "# Seed 001 Table 1: one-way link delay T = D_linkpath / c per scenario",
        "",
        f"Assumptions (not in the paper): Earth radius {R_E:.0f} km, GEO altitude {H_GEO:.0f} km, LEO "
        f"{LEO_KM[0]:.0f}-{LEO_KM[1]:.0f} km, MEO {MEO_KM:.0f} km, ground-station elevation mask "
        f"{ELEV_MASK_DEG:.0f} deg, GEO relays of scenario III {GEO_SPACING_DEG:.0f} deg apart, inter-satellite "
        f"lines above {GRAZE_KM:.0f} km.",
        "",
        "| scenario | hops | path | model min-max (ms) | paper (ms) | one-way delays of our runs (ms) | inside model range |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['scenario']} | {r['hops']} | {r['path']} | {r['min_ms']:.1f}-{r['max_ms']:.1f} | "
            f"{r['paper_min_ms']}-{r['paper_max_ms']} | {r['used_ms']} | {'yes' if r['used_inside'] else 'no'} |"
        )
    lines += ["", "Extremes:", ""]
    for r in rows:
        note = f"; {r['note']}" if r.get("note") else ""
        lines.append(f"- {r['scenario']}: min {r['min_case']}; max {r['max_case']}{note}.")
    ii, iii = rows[1], rows[2]
    lines += [
        "",
        f"The paper's upper values need the LEO ({LEO_KM[0]:.0f} km) within {ii['paper_max_leo_angle_deg']:.1f} deg "
        f"(II, {ii['paper_max_ms']} ms) and {iii['paper_max_leo_angle_deg']:.1f} deg (III, {iii['paper_max_ms']} ms) "
        f"of the relay's nadir, with the ground station at its relay's nadir; the LEO sees the GEO up to "
        f"{ii['paper_max_leo_angle_deg_limb']:.1f} deg.",
    ]
    text = "\n".join(lines) + "\n"
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(text)
    keys = ["scenario", "hops", "path", "min_km", "max_km", "min_ms", "max_ms", "paper_min_ms", "paper_max_ms",
            "used_inside", "min_case", "max_case"]
    with open(os.path.join(a.out, "table.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{r[k]:.3f}" if isinstance(r[k], float) else r[k]) for k in keys})
    with open(os.path.join(a.out, "provenance.json"), "w") as f:
        json.dump(provenance(sys.argv[1:]), f, indent=2)
        f.write("\n")
    print(text, end="")


if __name__ == "__main__":
    main()
