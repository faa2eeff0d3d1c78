#!/usr/bin/env bash
# Runs every cargo-fuzz target one after the other, each for SECONDS (default 600), at low priority, and prints
# one summary line per target (executions, coverage, features, corpus size, crash or not) at the end, also
# written to fuzz/summary.txt. Not part of CI (nightly, hours of CPU).
#   scripts/fuzz-all.sh [SECONDS] [TARGET...]
set -uo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
shift || true
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
cargo +nightly fuzz --version >/dev/null 2>&1 || cargo +nightly install --locked cargo-fuzz
if [ $# -gt 0 ]; then targets=("$@"); else mapfile -t targets < <(cargo +nightly fuzz list); fi
mkdir -p fuzz/logs
summary=fuzz/summary.txt
: >"$summary"
status=0
for t in "${targets[@]}"; do
  # Build first (not timed), then run for the full time.
  nice -n 10 cargo +nightly fuzz build "$t" >"fuzz/logs/$t.build.log" 2>&1 || { echo "$t: BUILD FAILED" | tee -a "$summary"; status=1; continue; }
  nice -n 10 scripts/fuzz.sh "$t" "$seconds" >"fuzz/logs/$t.log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "fuzz/logs/$t.log" | grep -o '[0-9]*$' | tail -1)
  last=$(grep -E '^#[0-9]+' "fuzz/logs/$t.log" | tail -1)
  cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.*ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.*corp: \([0-9]*\).*/\1/p' <<<"$last")
  verdict=ok; [ $rc -ne 0 ] && { verdict="CRASH (rc $rc, see fuzz/logs/$t.log and fuzz/artifacts/$t/)"; status=1; }
  echo "$t: ${seconds}s executions=${execs:-?} cov=${cov:-?} ft=${ft:-?} corpus=${corp:-?} $verdict" | tee -a "$summary"
done
exit $status
