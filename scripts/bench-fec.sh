#!/usr/bin/env bash
# Node-to-node goodput on loopback with packet-layer FEC below LTP (docs/fec.md) next to the same transfer without
# it, measured in the same run and alternated: 1024-byte LTP segments, 500 kB bundles, unpaced spans (adaptive
# pacing off in both), non-durable stores so the disk does not cap either. Three repetitions each (FEC mode given
# by MODE, default hsltp, Rc 8/9, K up to 1024); prints every run, the medians, their ratio and the load average.
# Release build.
#
# Usage: [MODE=hsltp|eclsa] scripts/bench-fec.sh [BUNDLES (default 400)] [REPS (default 3)]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
N="${1:-400}"
REPS="${2:-3}"
MODE="${MODE:-hsltp}"
SIZE=500000
cargo build --release -p dtnkit -q
BIN="$CARGO_TARGET_DIR/release/dtnkit"
WORK="$(mktemp -d)"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# run NAME FEC(0|1): goodput in Mbit/s of N bundles of SIZE bytes from node 1 to node 2.
run() {
  local name=$1 fec=$2 p1 p2; p1=$(free_port); p2=$(free_port)
  local d="$WORK/$name"; mkdir -p "$d"
  for n in 1 2; do
    local me peer pp
    if [ $n = 1 ]; then me=$p1; peer=2; pp=$p2; else me=$p2; peer=1; pp=$p1; fi
    cat > "$d/n$n.toml" <<EOT
node = $n
bind = "127.0.0.1:$me"
[store]
path = "$d/s$n"
durable = false
[[span]]
peer = $peer
address = "127.0.0.1:$pp"
max_segment_size = 1024
max_sessions = 64
aggregation_bytes = $SIZE
aggregation_ms = 1
rto_ms = 500
adaptive_rate = false
EOT
    if [ "$fec" = 1 ]; then
      printf '[span.fec]\nmode = "%s"\nmax_k = 1024\ncode_rate = "8/9"\n' "$MODE" >> "$d/n$n.toml"
    fi
    "$BIN" node --config "$d/n$n.toml" 2>"$d/n$n.err" & PIDS+=($!)
  done
  sleep 1
  "$BIN" recv --socket "$d/s2/app.sock" --endpoint ipn:2.1 --count "$N" --timeout 120 >/dev/null 2>"$d/recv.err" & local rp=$!
  sleep 0.3
  local t0 t1; t0=$(date +%s.%N)
  "$BIN" send --socket "$d/s1/app.sock" --dst ipn:2.1 --size $SIZE --count "$N" --quiet 2>/dev/null
  wait "$rp"
  t1=$(date +%s.%N)
  if [ "$fec" = 1 ]; then
    "$BIN" status --socket "$d/s2/app.sock" --json 2>/dev/null |
      python3 -c 'import json,sys; f=json.load(sys.stdin)["ltp"]["fec"]["1"]; print("  receiver FEC: %d matrices complete, %d decoded, %d failed" % (f["matrices_complete"], f["matrices_decoded"], f["matrices_failed"]), file=sys.stderr)' || true
  fi
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  PIDS=()
  python3 -c "print($N*$SIZE*8/($t1-$t0)/1e6)"
}

declare -a OFF ON
for r in $(seq 1 "$REPS"); do
  off=$(run "off$r" 0); on=$(run "on$r" 1)
  OFF+=("$off"); ON+=("$on")
  printf 'run %d: LTP %8.1f Mbit/s   LTP + FEC (%s) %8.1f Mbit/s   load %s\n' "$r" "$off" "$MODE" "$on" "$(cut -d' ' -f1 /proc/loadavg)"
done
moff=$(printf '%s\n' "${OFF[@]}" | median); mon=$(printf '%s\n' "${ON[@]}" | median)
printf 'median: LTP %.1f Mbit/s, LTP + FEC (%s, Rc 8/9) %.1f Mbit/s, ratio %.3f (1-min load %s)\n' \
  "$moff" "$MODE" "$mon" "$(python3 -c "print($mon/$moff)")" "$(cut -d' ' -f1 /proc/loadavg)"
