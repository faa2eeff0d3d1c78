#!/usr/bin/env bash
# Goodput of a two-node dtnkit LTP transfer on loopback next to iperf3's UDP goodput at the same datagram size,
# measured in the same run: 1024-byte LTP segments, 500 kB bundles, no rate limit. Three repetitions each; prints
# every run, the medians and the ratio. Release build.
#
# Usage: [DURABLE=true|false] scripts/goodput-ltp.sh [BUNDLES (default 200)] [REPS (default 3)]
# DURABLE (default true, the node default) sets the store's fsync-per-commit; false measures LTP without the disk.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
N="${1:-200}"
REPS="${2:-3}"
DURABLE="${DURABLE:-true}"
SIZE=500000
command -v iperf3 >/dev/null || { echo "iperf3 is required (apt-get install iperf3)" >&2; exit 1; }
cargo build --release -p dtnkit -q
BIN="$CARGO_TARGET_DIR/release/dtnkit"
WORK="$(mktemp -d)"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

iperf_run() {
  local port; port=$(free_port)
  iperf3 -s -1 -p "$port" >/dev/null 2>&1 & local sp=$!
  sleep 0.3
  # Received-side goodput of UDP payload at 1024-byte datagrams, unlimited offered rate.
  iperf3 -c 127.0.0.1 -p "$port" -u -l 1024 -b 0 -t 5 -J 2>/dev/null |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["end"]["sum"]["bits_per_second"]*(1-j["end"]["sum"]["lost_percent"]/100)/1e6)'
  wait "$sp" 2>/dev/null || true
}

ltp_run() {
  local r=$1 p1 p2; p1=$(free_port); p2=$(free_port)
  local d="$WORK/run$r"; mkdir -p "$d"
  for n in 1 2; do
    local me peer mp pp
    if [ $n = 1 ]; then me=$p1; peer=2; pp=$p2; else me=$p2; peer=1; pp=$p1; fi
    cat > "$d/n$n.toml" <<EOT
node = $n
bind = "127.0.0.1:$me"
[store]
path = "$d/s$n"
durable = $DURABLE
[[span]]
peer = $peer
address = "127.0.0.1:$pp"
max_segment_size = 1024
max_sessions = 64
aggregation_bytes = $SIZE
aggregation_ms = 1
rto_ms = 500
EOT
    "$BIN" node --config "$d/n$n.toml" 2>/dev/null & PIDS+=($!)
  done
  sleep 1
  "$BIN" recv --socket "$d/s2/app.sock" --endpoint ipn:2.1 --count "$N" --timeout 60 >/dev/null 2>"$d/recv.err" & local rp=$!
  sleep 0.3
  local t0 t1; t0=$(date +%s.%N)
  "$BIN" send --socket "$d/s1/app.sock" --dst ipn:2.1 --size $SIZE --count "$N" --quiet 2>/dev/null
  wait "$rp"
  t1=$(date +%s.%N)
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  PIDS=()
  python3 -c "print($N*$SIZE*8/($t1-$t0)/1e6)"
}

declare -a I L
for r in $(seq 1 "$REPS"); do
  i=$(iperf_run); l=$(ltp_run "$r")
  I+=("$i"); L+=("$l")
  printf 'run %d: iperf3 UDP 1024 B: %8.1f Mbit/s   dtnkit LTP: %8.1f Mbit/s\n' "$r" "$i" "$l"
done
mi=$(printf '%s\n' "${I[@]}" | median); ml=$(printf '%s\n' "${L[@]}" | median)
printf 'store durable=%s\n' "$DURABLE"
printf 'median: iperf3 %.1f Mbit/s, dtnkit LTP %.1f Mbit/s, ratio %.3f\n' "$mi" "$ml" "$(python3 -c "print($ml/$mi)")"
