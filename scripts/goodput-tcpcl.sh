#!/usr/bin/env bash
# Goodput over TCPCLv4 on loopback, three figures from the same run: iperf3 TCP (the machine's TCP ceiling),
# dtnkit -> dtnkit (1 MB bundles, delivered to `dtnkit recv`), and dtnkit -> dtnd (1 MB bundles, until every transfer
# is acknowledged by dtn7's dtnd and the sender's store is empty). REPS repetitions each; prints every run and the
# medians. Release build.
#
# Usage: [DURABLE=true|false] [DTNKIT_DTND=path] scripts/goodput-tcpcl.sh [BUNDLES (default 200)] [REPS (default 3)]
# DURABLE (default true, the node default) sets the stores' fsync-per-commit. Without dtnd the dtnd column is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
N="${1:-200}"
REPS="${2:-3}"
DURABLE="${DURABLE:-true}"
SIZE=1000000
DTND="${DTNKIT_DTND:-${DTNKIT_CACHE:-$HOME/.cache/dtnkit}/dtn7/bin/dtnd}"
command -v iperf3 >/dev/null || { echo "iperf3 is required (apt-get install iperf3)" >&2; exit 1; }
cargo build --release -p dtnkit -q
BIN="$CARGO_TARGET_DIR/release/dtnkit"
WORK="$(mktemp -d)"
PIDS=()
stop_all() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done; PIDS=(); }
cleanup() { stop_all; rm -rf "$WORK"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

iperf_run() {
  local port; port=$(free_port)
  iperf3 -s -1 -p "$port" >/dev/null 2>&1 & local sp=$!
  sleep 0.3
  iperf3 -c 127.0.0.1 -p "$port" -t 5 -J 2>/dev/null |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["end"]["sum_received"]["bits_per_second"]/1e6)'
  wait "$sp" 2>/dev/null || true
}

# node N, TCPCL listen port, then "peer address" pairs (address may be empty: accept only).
node_conf() {
  local d=$1 n=$2 listen=$3 peer=$4 paddr=$5 extra=${6:-}
  cat > "$d/n$n.toml" <<EOT
node = $n
bind = "127.0.0.1:$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
[store]
path = "$d/s$n"
durable = $DURABLE
quota_bytes = 4_000_000_000
[tcpcl]
listen = "127.0.0.1:$listen"
[[tcp_peer]]
peer = $peer
$( [ -n "$paddr" ] && echo "address = \"127.0.0.1:$paddr\"" )
$extra
EOT
}

wait_socket() { for _ in $(seq 1 200); do "$BIN" status --socket "$1" >/dev/null 2>&1 && return 0; sleep 0.05; done; return 1; }

tcpcl_run() {
  local r=$1 t1 t2; t1=$(free_port); t2=$(free_port)
  local d="$WORK/k$r"; mkdir -p "$d"
  node_conf "$d" 1 "$t1" 2 "$t2"
  node_conf "$d" 2 "$t2" 1 ""
  "$BIN" node --config "$d/n2.toml" 2>"$d/n2.err" & PIDS+=($!)
  "$BIN" node --config "$d/n1.toml" 2>"$d/n1.err" & PIDS+=($!)
  wait_socket "$d/s1/app.sock"; wait_socket "$d/s2/app.sock"; sleep 0.5
  "$BIN" recv --socket "$d/s2/app.sock" --endpoint ipn:2.1 --count "$N" --timeout 120 >/dev/null 2>"$d/recv.err" & local rp=$!
  sleep 0.3
  local a b; a=$(date +%s.%N)
  "$BIN" send --socket "$d/s1/app.sock" --dst ipn:2.1 --size $SIZE --count "$N" --quiet 2>/dev/null
  wait "$rp"
  b=$(date +%s.%N)
  stop_all
  python3 -c "print($N*$SIZE*8/($b-$a)/1e6)"
}

dtnd_run() {
  local r=$1 t1 t23 http; t1=$(free_port); t23=$(free_port); http=$(free_port)
  local d="$WORK/d$r"; mkdir -p "$d/dtnd"
  node_conf "$d" 1 "$t1" 23 "$t23" "exceed_peer_transfer_mru = true"
  "$DTND" -n 23 -e 42 -W "$d/dtnd" -w "$http" -C "tcp:port=$t23" -r epidemic -D mem --disable_nd -4 \
    -s "tcp://127.0.0.1:$t1/1" >"$d/dtnd.out" 2>&1 & PIDS+=($!)
  "$BIN" node --config "$d/n1.toml" 2>"$d/n1.err" & PIDS+=($!)
  wait_socket "$d/s1/app.sock"
  for _ in $(seq 1 200); do
    [ "$("$BIN" status --socket "$d/s1/app.sock" --json | python3 -c 'import json,sys; print((json.load(sys.stdin)["tcpcl"] or {}).get("sessions_established",0))')" -ge 1 ] && break
    sleep 0.05
  done
  local a b; a=$(date +%s.%N)
  "$BIN" send --socket "$d/s1/app.sock" --dst ipn:23.42 --size $SIZE --count "$N" --quiet 2>/dev/null
  # Done when every transfer is acknowledged and the sender deleted its copies.
  for _ in $(seq 1 6000); do
    [ "$("$BIN" status --socket "$d/s1/app.sock" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["store"]["bundles"])')" = 0 ] && break
    sleep 0.02
  done
  b=$(date +%s.%N)
  stop_all
  python3 -c "print($N*$SIZE*8/($b-$a)/1e6)"
}

declare -a I K D
for r in $(seq 1 "$REPS"); do
  i=$(iperf_run); k=$(tcpcl_run "$r")
  I+=("$i"); K+=("$k")
  if [ -x "$DTND" ]; then x=$(dtnd_run "$r"); D+=("$x"); else x=nan; fi
  printf 'run %d: iperf3 TCP: %8.1f Mbit/s   dtnkit->dtnkit TCPCL: %8.1f Mbit/s   dtnkit->dtnd TCPCL: %8.1f Mbit/s\n' \
    "$r" "$i" "$k" "$x"
done
mi=$(printf '%s\n' "${I[@]}" | median); mk=$(printf '%s\n' "${K[@]}" | median)
printf 'store durable=%s, %d bundles of %d bytes per run\n' "$DURABLE" "$N" "$SIZE"
printf 'median: iperf3 TCP %.1f Mbit/s, dtnkit->dtnkit %.1f Mbit/s (ratio %.3f)' "$mi" "$mk" "$(python3 -c "print($mk/$mi)")"
if [ ${#D[@]} -gt 0 ]; then
  md=$(printf '%s\n' "${D[@]}" | median)
  printf ', dtnkit->dtnd %.1f Mbit/s (ratio %.3f)' "$md" "$(python3 -c "print($md/$mi)")"
fi
printf '\n'
