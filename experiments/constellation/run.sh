#!/usr/bin/env bash
# Runs one constellation experiment (experiments/constellation_*.toml): computes the contact plan from the orbits
# (`dtnkit plan walker`), appends the traffic and per-node bundle and route logs to the generated scenario, runs it
# in `dtnkit sim`, then `dtnkit sim-report` writes the network results and plots into
# experiments/results/<name>/ with provenance.json (commit, uncommitted changes outside these results, command).
# Optional keys (geo_lon, geo_first_node, geo_*_rate, ...) become the `dtnkit plan` flags of the same name. The
# generated plan, scenario and per-node logs are deleted afterwards (set KEEP_LOGS=1 to keep them in
# experiments/results/<name>/).
#
#   experiments/constellation/run.sh experiments/constellation_leo.toml
#
# DTNKIT selects the binary (default: target/release/dtnkit).
set -euo pipefail
cd "$(dirname "$0")/../.."
f=${1:?usage: run.sh experiments/constellation_NAME.toml}
[ -f "$f" ] || { echo "run.sh: $f: no such file" >&2; exit 2; }
bin=${DTNKIT:-${CARGO_TARGET_DIR:-$PWD/target}/release/dtnkit}
[ -x "$bin" ] || { echo "run.sh: $bin: no dtnkit binary (cargo build --release -p dtnkit, or set DTNKIT)" >&2; exit 2; }
key() { # key NAME: the string value of `NAME = "..."` in $f
  local v
  v=$(sed -n "s/^$1 *= *\"\(.*\)\".*/\1/p" "$f" | head -n1)
  [ -n "$v" ] || { echo "run.sh: $f: no $1 = \"...\" line" >&2; exit 2; }
  echo "$v"
}
optkey() { # optkey NAME: the string value of `NAME = "..."` in $f, or nothing
  sed -n "s/^$1 *= *\"\(.*\)\".*/\1/p" "$f" | head -n1
}
name=$(basename "$f" .toml)
here=$(dirname "$f")
out=experiments/results/$name
rm -rf "$out"
mkdir -p "$out/run"
plan_args=(walker "$(key walker)" --altitude-km "$(key altitude_km)" --stations "$here/$(key stations)"
  --start "$(key start)" --duration "$(key duration)" --isl-max-range-km "$(key isl_max_range_km)")
# Optional keys, passed on as the `dtnkit plan` flag of the same name when present (GEO relays, rates, OWLT step).
for k in geo_lon geo_first_node geo_max_range_km geo_downlink_rate geo_uplink_rate geo_isl_rate \
  downlink_rate uplink_rate isl_rate owlt_step_ms; do
  v=$(optkey "$k")
  [ -z "$v" ] || plan_args+=("--${k//_/-}" "$v")
done
t0=$(date +%s)
"$bin" plan "${plan_args[@]}" --out "$out/run/plan.txt" --scenario-out "$out/run/scenario.toml" \
  2> "$out/plan.txt.log"
cat "$out/plan.txt.log"
cat "$here/$(key traffic)" >> "$out/run/scenario.toml"
printf '\n[log]\nbundle_csv = "../logs/bundles-{node}.csv"\nroute_csv = "../logs/routes-{node}.csv"\n' \
  >> "$out/run/scenario.toml"
/usr/bin/time -v "$bin" sim "$out/run/scenario.toml" --json --quiet > "$out/sim_summary.json" 2> "$out/sim_time.txt"
t1=$(date +%s)
"$bin" sim-report "$out/run/scenario.toml" --out "$out" --check-bookings > /dev/null
commit=$(git rev-parse HEAD)
# Changes to the code or the experiment files at the time of the run; this experiment's own results (being written
# now, or left by an earlier run) are not counted.
dirty=$(git status --porcelain --untracked-files=no -- crates Cargo.toml Cargo.lock experiments \
  ":(exclude)$out" | grep -c . || true)
cat > "$out/provenance.json" <<JSON
{
  "commit": "$commit",
  "uncommitted_changes": $dirty,
  "command": "experiments/constellation/run.sh $f",
  "binary": "$bin",
  "sim_wall_s": $((t1 - t0)),
  "finished": "$(date -u +%FT%TZ)",
  "load_average": "$(cut -d' ' -f1-3 /proc/loadavg)",
  "nproc": $(nproc)
}
JSON
# The generated plan and scenario (MBs) and the per-node logs are reproducible from the experiment file.
[ "${KEEP_LOGS:-0}" = 1 ] || rm -rf "$out/run" "$out/logs"
echo "run.sh: $name: results in $out"
