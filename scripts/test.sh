#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need (Debian packages, cargo tools, the interop
# peers dtn7 and cfdp-py, the Skyfield propagator, cached in ${DTNKIT_CACHE:-~/.cache/dtnkit}), then runs the format
# check, clippy with -D warnings, the doc tests and every other test. The last lines are cargo-nextest's own summary, so a run that
# executed no test shows.
#
# Environment: CARGO_TARGET_DIR (default: ./target) is shared by every step so nothing is built twice;
# CARGO_INCREMENTAL (default: 0) may be set to 1 for repeated local runs; PROPTEST_RNG_SEED (default: fixed) picks
# the property tests' cases.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# A clean clone gains nothing from incremental state, which alone took 1.6 GB of a 4.8 GB target directory.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# Property tests draw the same cases on every run, so a result is reproducible; set another seed to explore more.
export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-20261122}"

step() { printf '\n==> %s\n' "$*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# --- Disk: a clean build of the suite needs about 3 GB in the target directory -----------------------------------------
mkdir -p "$CARGO_TARGET_DIR"
free_kb=$(df -Pk "$CARGO_TARGET_DIR" | awk 'NR == 2 { print $4 }')
if [ "${free_kb:-0}" -lt $((3 * 1024 * 1024)) ]; then
  echo "warning: only $((free_kb / 1024)) MB free under $CARGO_TARGET_DIR; a clean build of the suite needs about 3 GB" >&2
fi

# --- Debian packages: tshark (LTP/BPv7/TCPCL/CFDP dissectors used as an oracle), python3-venv (cfdp-py's venv), iproute2,
# clang and bpftool (BPF congestion controls), Slurm,
# chromium (the node's web view in a real browser, crates/dtnkit/tests/web_view.rs: about 80 MB, a minute or two once)
missing=()
command -v tshark >/dev/null 2>&1 || missing+=(tshark)
python3 -c 'import ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)  # the emulator's IP mode (crates/dtnkit/tests/ipemu.rs)
# TCP Hybla and STP are BPF congestion controls the IP mode compiles and registers at run time
# (crates/emu/tests/bpf_congctl.rs)
command -v clang >/dev/null 2>&1 || missing+=(clang)
command -v bpftool >/dev/null 2>&1 || [ -x /usr/sbin/bpftool ] || missing+=(bpftool)
# A private single-node Slurm cluster for `dtnkit bench --executor slurm` (crates/dtnkit/tests/bench_slurm.rs, started
# by scripts/slurm-localhost.sh with its own configuration; /etc/slurm is left alone).
[ -x /usr/sbin/slurmctld ] || missing+=(slurmctld)
[ -x /usr/sbin/slurmd ] || missing+=(slurmd)
[ -x /usr/sbin/munged ] || missing+=(munge)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  step "installing Debian packages: ${missing[*]}"
  echo "wireshark-common wireshark-common/install-setuid boolean false" | as_root debconf-set-selections
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

export DTNKIT_CHROMIUM="${DTNKIT_CHROMIUM:-$(command -v chromium)}"
# systemd-analyze (Debian package systemd) verifies the service unit (crates/dtnkit/tests/systemd_unit.rs) where it
# is installed; it is not installed here, and the test says so when it skips.

# --- Rust tools ------------------------------------------------------------------------------------------------------
rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
if ! cargo nextest --version >/dev/null 2>&1; then
  step "installing cargo-nextest (one-time build, a few minutes)"
  cargo install --locked cargo-nextest
fi

# --- dtn7's dtnd: the independent TCPCLv4/BPv7 peer of the interop tests ------------------------------------------
# Built once into a cache outside the clone (a cold build takes 10-15 minutes); the tests find it through DTNKIT_DTND.
DTN7_DIR="${DTNKIT_CACHE:-$HOME/.cache/dtnkit}/dtn7"
if [ ! -x "$DTN7_DIR/bin/dtnd" ]; then
  step "installing dtn7 (dtnd) into $DTN7_DIR (one-time build, 10-15 minutes)"
  cargo install --locked dtn7 --root "$DTN7_DIR"
fi
export DTNKIT_DTND="$DTN7_DIR/bin/dtnd"

# --- cfdp-py: the independent CFDP entity of the CFDP interop tests (crates/dtnkit/tests/cfdp_interop.rs) -----------
# A venv in the same cache, with every package pinned (cfdp-py's own requirements included, so pip resolves nothing);
# rebuilt only when the pins change or the venv no longer runs. The tests find it through DTNKIT_CFDP_PY.
CFDP_VENV="${DTNKIT_CACHE:-$HOME/.cache/dtnkit}/cfdp-venv"
CFDP_PINS="cfdp-py==0.7.0 spacepackets==0.32.0 cbor2==6.3.0 fastcrc==0.3.6 deprecation==2.1.0 packaging==26.3"
if [ "$(cat "$CFDP_VENV/pins.txt" 2>/dev/null)" != "$CFDP_PINS" ] || ! "$CFDP_VENV/bin/python" -c 'import cfdppy' 2>/dev/null; then
  step "installing cfdp-py into $CFDP_VENV"
  rm -rf "$CFDP_VENV"
  python3 -m venv "$CFDP_VENV"
  # shellcheck disable=SC2086 # the pins are words
  "$CFDP_VENV/bin/pip" install -q --disable-pip-version-check --no-input $CFDP_PINS
  echo "$CFDP_PINS" >"$CFDP_VENV/pins.txt"
fi
export DTNKIT_CFDP_PY="$CFDP_VENV/bin/python"

# --- pyd3tn: µD3TN's Python library, the independent BPDU encoder of crates/bibe/tests/pyd3tn_bpdu.rs ------------------
# Same pattern: a pinned venv in the cache; the test finds it through DTNKIT_PYD3TN_PY.
PYD3TN_VENV="${DTNKIT_CACHE:-$HOME/.cache/dtnkit}/pyd3tn-venv"
PYD3TN_PINS="pyd3tn==0.15.2 cbor2==5.8.0"
if [ "$(cat "$PYD3TN_VENV/pins.txt" 2>/dev/null)" != "$PYD3TN_PINS" ] || ! "$PYD3TN_VENV/bin/python" -c 'import pyd3tn.bundle7' 2>/dev/null; then
  step "installing pyd3tn into $PYD3TN_VENV"
  rm -rf "$PYD3TN_VENV"
  python3 -m venv "$PYD3TN_VENV"
  # shellcheck disable=SC2086 # the pins are words
  "$PYD3TN_VENV/bin/pip" install -q --disable-pip-version-check --no-input $PYD3TN_PINS
  echo "$PYD3TN_PINS" >"$PYD3TN_VENV/pins.txt"
fi
export DTNKIT_PYD3TN_PY="$PYD3TN_VENV/bin/python"

# --- Skyfield: the independent propagator that checks the contact-plan generator's passes (crates/orbit/tests) ----------
# Same pattern: a pinned venv in the cache, rebuilt only when the pins change; the tests find it through DTNKIT_ORBIT_PY.
ORBIT_VENV="${DTNKIT_CACHE:-$HOME/.cache/dtnkit}/orbit-venv"
ORBIT_PINS="skyfield==1.55 sgp4==2.27 numpy==2.4.6 jplephem==2.24 certifi==2026.10.19.post1"
if [ "$(cat "$ORBIT_VENV/pins.txt" 2>/dev/null)" != "$ORBIT_PINS" ] || ! "$ORBIT_VENV/bin/python" -c 'import skyfield' 2>/dev/null; then
  step "installing Skyfield into $ORBIT_VENV"
  rm -rf "$ORBIT_VENV"
  python3 -m venv "$ORBIT_VENV"
  # shellcheck disable=SC2086 # the pins are words
  "$ORBIT_VENV/bin/pip" install -q --disable-pip-version-check --no-input $ORBIT_PINS
  echo "$ORBIT_PINS" >"$ORBIT_VENV/pins.txt"
fi
export DTNKIT_ORBIT_PY="$ORBIT_VENV/bin/python"

# --- Checks ----------------------------------------------------------------------------------------------------------
step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "doc tests"
cargo test --workspace --doc --locked

step "tests (cargo nextest)"
cargo nextest run --workspace --locked --no-fail-fast
