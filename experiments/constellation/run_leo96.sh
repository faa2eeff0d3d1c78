#!/bin/sh
# 24-hour Walker-delta LEO shell (53°: 96 satellites in 8 planes, 550 km, inter-satellite links up to 5000 km)
# with the ten ground stations of stations10.toml and the traffic of traffic.toml, simulated with the real
# agent, CGR and LTP. Generates the contact plan and scenario into $OUT (default ./leo96-out), then runs it.
# Usage: run_leo96.sh [duration, e.g. 24h or 600s] [extra dtnkit sim options]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$PWD/leo96-out}
dur=${1:-24h}
[ $# -gt 0 ] && shift
mkdir -p "$out"
dtnkit plan walker 53:96/8/1 --altitude-km 550 --stations "$here/stations10.toml" \
    --start 2026-01-01T00:00:00Z --duration "$dur" --isl-max-range-km 5000 \
    --out "$out/plan.txt" --scenario-out "$out/scenario.toml"
cat "$here/traffic.toml" >> "$out/scenario.toml"
dtnkit sim "$out/scenario.toml" "$@"
