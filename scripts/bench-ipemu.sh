#!/usr/bin/env bash
# TCP through the emulator's IP mode (lossless model, no delay) against the same TCP flow over a plain veth pair,
# alternating in one run so both see the same machine load (root; docs/ipemu.md, "Capacity").
#
#   scripts/bench-ipemu.sh [ROUNDS] [BYTES]        # defaults: 3 rounds of 2 GB
#
# Environment: DTNKIT (default target/release/dtnkit), CC (congestion control, default cubic), MTU (default 1500).
set -euo pipefail
cd "$(dirname "$0")/.."
D="${DTNKIT:-${CARGO_TARGET_DIR:-target}/release/dtnkit}"
ROUNDS="${1:-3}"
BYTES="${2:-2000000000}"
CC="${CC:-cubic}"
MTU="${MTU:-1500}"
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 2; }
[ -x "$D" ] || { echo "no dtnkit binary at $D (cargo build --release -p dtnkit)" >&2; exit 2; }
V1="dtkbench$$-1"
V2="dtkbench$$-2"
cleanup() { ip netns del "$V1" 2>/dev/null || true; ip netns del "$V2" 2>/dev/null || true; }
trap cleanup EXIT
ip netns add "$V1"
ip netns add "$V2"
ip link add dtkv1 netns "$V1" type veth peer name dtkv2 netns "$V2"
ip -n "$V1" addr add 10.202.0.1/24 dev dtkv1
ip -n "$V2" addr add 10.202.0.2/24 dev dtkv2
ip -n "$V1" link set dtkv1 up mtu "$MTU"
ip -n "$V2" link set dtkv2 up mtu "$MTU"
ip -n "$V1" link set lo up
ip -n "$V2" link set lo up

# One transfer: receiver in namespace $1 on $2, sender in namespace $3; prints the sender's goodput in Mb/s.
transfer() {
  ip netns exec "$1" "$D" tcp recv --listen "$2:5001" --count 1 --cc "$CC" >/dev/null 2>&1 &
  local rx=$!
  sleep 0.3
  ip netns exec "$3" "$D" tcp send --to "$2:5001" --size "$BYTES" --cc "$CC" --json |
    sed -n 's/.*"goodput_mbps":\([0-9.]*\).*/\1/p'
  wait "$rx"
}

printf 'round  load   veth Mb/s   emulator Mb/s   ratio  emulator drops other than the model\n'
for r in $(seq 1 "$ROUNDS"); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  veth=$(transfer "$V2" 10.202.0.2 "$V1")
  cfg=$(mktemp)
  printf '[ip]\nmtu = %s\n' "$MTU" >"$cfg"
  out=$("$D" emu --ip --config "$cfg" -- sh -c \
    "$(declare -f transfer); D='$D' CC='$CC' BYTES='$BYTES'; transfer \$DTNKIT_NS_B \$DTNKIT_ADDR_B \$DTNKIT_NS_A" \
    2>/dev/null)
  rm -f "$cfg"
  emu=$(printf '%s\n' "$out" | sed -n 1p)
  drops=$(printf '%s\n' "$out" | sed -n 's/^drops other than the models. decisions: //p')
  printf '%5s  %5s  %10.0f  %14.0f   %5s  %s\n' "$r" "$load" "${veth:-0}" "${emu:-0}" \
    "$(awk -v a="$emu" -v b="$veth" 'BEGIN { if (b > 0) printf "%.2f", a / b }')" "${drops:-?}"
done
