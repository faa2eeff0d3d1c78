#!/usr/bin/env bash
# Runs seed 002's loopback experiments one after another (release build; ~35 min on a 2-core machine) and records
# the 1-minute load average before and after each in experiments/results/seed002_load.txt. Each run's own load at
# its start is the `load_start` column of runs.csv. Usage: experiments/run_seed002.sh [NAME ...] (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p dtnkit -q
bin="${CARGO_TARGET_DIR:-$PWD/target}/release/dtnkit"
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(bundle_size udpcl tcpcl_buffer affinity chain streams cfdp)
log=experiments/results/seed002_load.txt
mkdir -p experiments/results
for n in "${names[@]}"; do
  before=$(cut -d' ' -f1-3 /proc/loadavg)
  start=$(date -u +%FT%TZ)
  t0=$(date +%s)
  "$bin" bench "experiments/seed002_$n.toml" --mode loopback --quiet
  echo "seed002_$n start $start wall $(( $(date +%s) - t0 )) s load(1,5,15 min) before $before after $(cut -d' ' -f1-3 /proc/loadavg) nproc $(nproc)" >> "$log"
done
