#!/usr/bin/env bash
# Throughput of dtnkit next to the machine's own ceiling, measured in the same run (issue 9, docs/throughput.md):
# BP over LTP for 1024/1400/8192/65000-byte segments and 500 kB / 5 MB bundles against iperf3 UDP at the same
# datagram size, BP over TCPCLv4 for 100 kB / 1 MB / 5 MB bundles and over STCP for 1 MB / 5 MB bundles against
# iperf3 TCP, node CPU time per GB and peak
# RSS, and the CPU each node thread spends per GB. Relay rows (--only relay, or after the others): A -> B -> C with B
# storing and forwarding, next to the direct pair in the same repetition, with the middle node's RSS. Every point is
# repeated (default 3) and reported as min / median / max plus the ratio of the medians, with
# durable stores (ceiling: min(network, disk/2), the disk rate measured in the same run) and without fsync, and a
# 5 GB transfer checks each node's peak memory. CFDP rows (--only cfdp, or after the others): a class-2 CFDP put over
# BP (one PDU per bundle, per checksum) next to plain BP with bundles of the same size (docs/cfdp.md).
# Large bundles (--only large, never in the default run; issue 30): TCPCL 1 MB / 50 MB / 1 GB and LTP 8192-byte
# segments 500 kB / 50 MB / 1 GB bundles (streamed, stored and delivered as fragments), then one 4 GiB bundle per
# CLA with its SHA-256 checked, each with goodput, CPU s/GB per node and per thread, and each node's peak RSS.
#
# Usage: scripts/bench.sh [--out DIR] [--reps N] [--bytes B] [--only ltp|tcpcl|stcp|tcp|relay|cfdp|large] [--store both|durable|volatile] ...
#        (all options: python3 scripts/throughput.py --help)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
if ! command -v iperf3 >/dev/null 2>&1; then
  echo "installing iperf3 (Debian package)" >&2
  echo "iperf3 iperf3/start_daemon boolean false" | as_root debconf-set-selections
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iperf3 >/dev/null
fi
cargo build --release -p dtnkit -q
exec python3 scripts/throughput.py --bin "$CARGO_TARGET_DIR/release/dtnkit" "$@"
