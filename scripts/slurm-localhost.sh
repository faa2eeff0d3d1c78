#!/usr/bin/env bash
# A private single-node Slurm cluster on this machine, for the tests of `dtnkit bench --executor slurm`
# (crates/dtnkit/tests/bench_slurm.rs) and for trying the executor without a cluster.
#
#   scripts/slurm-localhost.sh start DIR [LINE...]
#                                          configure and start munged, slurmctld and slurmd, all private to DIR
#                                          (own munge key and socket, free TCP ports, state, spool and logs in DIR);
#                                          each LINE (e.g. MaxArraySize=5) is appended to slurm.conf; waits until
#                                          the node is idle and prints the slurm.conf to export as SLURM_CONF for
#                                          sbatch, squeue, scancel and dtnkit
#   scripts/slurm-localhost.sh stop DIR    cancels the cluster's jobs, stops its daemons and removes DIR
#
# Needs root and the Debian packages slurmctld, slurmd and munge (scripts/test.sh installs them). The daemons are
# started directly (no systemd): they daemonize and write pid files into DIR, which `stop` uses; nothing else on the
# machine is touched, so a system-wide Slurm or munge keeps running. `start` on a DIR that already holds a cluster
# stops that one first, so it is idempotent. The node's line (name, CPUs, memory) comes from `slurmd -C`; the node
# is addressed as 127.0.0.1, so no name resolution is needed. Every wait is bounded.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"  # the daemons and mungekey live there

die() { echo "slurm-localhost: $*" >&2; exit 1; }

# Polls `$@` every 0.2 s until it succeeds, for at most $1 seconds.
wait_for() {
  local limit=$1; shift
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Stops the daemon whose pid file is $1: SIGTERM, up to 15 s, then SIGKILL.
stop_daemon() {
  local pidfile=$1 pid
  alive "$pidfile" || return 0
  pid=$(cat "$pidfile")
  kill -TERM "$pid" 2>/dev/null || true
  if ! wait_for 15 bash -c "! kill -0 $pid"; then
    kill -KILL "$pid" 2>/dev/null || true
    wait_for 5 bash -c "! kill -0 $pid" || echo "slurm-localhost: pid $pid did not exit" >&2
  fi
}

# A TCP port nobody listens on, from a range unlikely to be used by other services.
free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 20000))
    if [ -z "$(ss -Htln "sport = :$p" 2>/dev/null)" ] && [[ " ${USED_PORTS:-} " != *" $p "* ]]; then
      USED_PORTS="${USED_PORTS:-} $p"
      echo "$p"
      return 0
    fi
  done
  die "no free TCP port found"
}

stop() {
  local dir=$1
  [ -d "$dir" ] || return 0
  if alive "$dir/slurmctld.pid" && [ -f "$dir/slurm.conf" ]; then
    # Jobs first: their step daemons (slurmstepd) would outlive slurmd.
    SLURM_CONF="$dir/slurm.conf" scancel --quiet --full --user="$(id -un)" 2>/dev/null || true
    wait_for 30 bash -c "[ -z \"\$(SLURM_CONF='$dir/slurm.conf' squeue --noheader 2>/dev/null)\" ]" ||
      echo "slurm-localhost: jobs still listed after 30 s" >&2
  fi
  stop_daemon "$dir/slurmd.pid"
  stop_daemon "$dir/slurmctld.pid"
  stop_daemon "$dir/munged.pid"
  rm -rf "$dir"
}

start() {
  local dir=$1
  shift
  [ "$(id -u)" = 0 ] || die "needs root (slurmd starts jobs as their users)"
  for tool in munged mungekey slurmctld slurmd sbatch squeue scancel sinfo ss; do
    command -v "$tool" >/dev/null || die "$tool not found: install the Debian packages slurmctld slurmd munge (and iproute2)"
  done
  stop "$dir"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  chmod 755 "$dir"  # munged: everyone must reach its socket; only root may write here
  mkdir -p "$dir/state" "$dir/spool"

  mungekey --create --keyfile="$dir/munge.key"
  chmod 600 "$dir/munge.key"
  munged --key-file="$dir/munge.key" --socket="$dir/munge.socket" --pid-file="$dir/munged.pid" \
    --log-file="$dir/munged.log" --seed-file="$dir/munged.seed" ||
    die "munged did not start: $(tail -5 "$dir/munged.log" 2>/dev/null)"
  wait_for 10 test -S "$dir/munge.socket" || die "munged made no socket within 10 s"

  local node host ctld_port slurmd_port
  node=$(slurmd -C | head -1)
  [[ "$node" == NodeName=* ]] || die "slurmd -C printed no node line: $node"
  host=${node#NodeName=}
  host=${host%% *}
  ctld_port=$(free_port)
  slurmd_port=$(free_port)
  cat >"$dir/slurm.conf" <<EOF
# Written by scripts/slurm-localhost.sh: a private single-node cluster.
ClusterName=dtnkit-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=5
InactiveLimit=0
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  printf '%s\n' "$@" >>"$dir/slurm.conf"
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -f "$SLURM_CONF" || die "slurmctld did not start: $(tail -5 "$dir/slurmctld.log" 2>/dev/null)"
  wait_for 30 scontrol ping || die "slurmctld did not answer within 30 s: $(tail -5 "$dir/slurmctld.log" 2>/dev/null)"
  slurmd -f "$SLURM_CONF" || die "slurmd did not start: $(tail -5 "$dir/slurmd.log" 2>/dev/null)"
  idle() { [ "$(sinfo --noheader --responding --format=%T 2>/dev/null)" = idle ]; }
  wait_for 60 idle || die "the node is not idle after 60 s: $(sinfo --noheader --format='%T %E' 2>&1); $(tail -5 "$dir/slurmd.log" 2>/dev/null)"
  echo "$SLURM_CONF"
}

case "${1:-}" in
  start) [ $# -ge 2 ] || die "usage: $0 start DIR [SLURM.CONF LINE...]"; shift; start "$@" ;;
  stop) [ $# = 2 ] || die "usage: $0 stop DIR"; stop "$2" ;;
  *) die "usage: $0 start DIR [SLURM.CONF LINE...] | stop DIR" ;;
esac
