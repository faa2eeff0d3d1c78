#!/usr/bin/env bash
# Runs one cargo-fuzz target for a bounded time (not part of CI: it needs nightly and minutes of CPU).
#   scripts/fuzz.sh TARGET [SECONDS]      e.g. scripts/fuzz.sh bundle_decode 600
# Targets: `cargo +nightly fuzz list` in this repository. Ends with libFuzzer's final statistics (executions,
# coverage); exits non-zero if the target crashed, with the crashing input under fuzz/artifacts/TARGET/.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:?usage: scripts/fuzz.sh TARGET [SECONDS]}"
seconds="${2:-60}"
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
cargo +nightly fuzz --version >/dev/null 2>&1 || cargo +nightly install --locked cargo-fuzz
mkdir -p "fuzz/corpus/$target"
# Seed the corpus with the committed sample inputs, if the target has any.
if [ -d "fuzz/seeds/$target" ]; then cp -n "fuzz/seeds/$target"/* "fuzz/corpus/$target/" 2>/dev/null || true; fi
exec cargo +nightly fuzz run "$target" "fuzz/corpus/$target" -- -max_total_time="$seconds" -print_final_stats=1
