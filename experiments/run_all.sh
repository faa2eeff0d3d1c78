#!/usr/bin/env bash
# Re-runs every experiment of experiments/ and writes its results to experiments/results/<name>/, each with the
# provenance.json `dtnkit bench` records (commit, uncommitted changes, command line).
#
#   experiments/run_all.sh [--only PATTERN] [--dry-run] [--slurm] [--jobs N] [--allow-dirty] [--no-build]
#
#   --only PATTERN run only the selected jobs: a PATTERN that is exactly a job's name selects that job alone
#                  (`--only constellation_leo` does not also run constellation_leo_24h); any other PATTERN is an
#                  extended regular expression matched anywhere in the names (grep -E), e.g. 'seed004_(geo|e2e)',
#                  '^seed001' or 'seed000' (every job of seed 000); --dry-run shows what a PATTERN selects
#   --dry-run      print the jobs (name, kind, command) and run nothing
#   --slurm        real-time grids (modes emu, ip, loopback) through `dtnkit bench --executor slurm --wait`
#                  (SLURM_CONF as for sbatch; extra sbatch arguments in $RUN_ALL_SBATCH_ARGS, one per word);
#                  without it they run here, one after another
#   --jobs N       worker threads of each simulator grid (default 2: the machine is shared)
#   --allow-dirty  run although the code or the experiment inputs have uncommitted changes (the results then record
#                  a dirty tree and cannot be reproduced from their commit)
#   --no-build     use the release binary as it is
#
# Kinds of job: `sim` (simulator grids: deterministic, the runs of a grid in parallel with --jobs), `rt` (real time:
# emulator, IP mode (root), loopback nodes; never in parallel with each other on one machine), `calc` (computed
# tables, no runs). Files with mode = "constellation" (experiments/constellation_*.toml) run through
# experiments/constellation/run.sh as `sim` jobs (plan from the orbits, simulation, `dtnkit sim-report`). The
# simulator grids of seeds 000 and 003 take ~5 min each, seed 004's ~3-12 min each; the
# real-time grids take 20-40 min each (seed 002's eight ~40 min together, IP-mode ones 10-30 min).
set -euo pipefail
cd "$(dirname "$0")/.."

only="" dry=0 slurm=0 jobs=2 allow_dirty=0 build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --only) only="${2:?--only needs a pattern}"; shift 2 ;;
    --dry-run) dry=1; shift ;;
    --slurm) slurm=1; shift ;;
    --jobs) jobs="${2:?--jobs needs a number}"; shift 2 ;;
    --allow-dirty) allow_dirty=1; shift ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,/^[^#]/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_all.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$jobs" in ''|*[!0-9]*|0) echo "run_all.sh: --jobs '$jobs': expected a positive number" >&2; exit 2 ;; esac

bin="${CARGO_TARGET_DIR:-$PWD/target}/release/dtnkit"

# The jobs, in order: name|kind|command. Every experiment file is one job (its mode decides the kind); a few
# experiments are also run a second way, and computed tables come last.
list_jobs() {
  local f name mode kind
  for f in experiments/*.toml; do
    name=$(basename "$f" .toml)
    mode=$(sed -n 's/^mode *= *"\([a-z]*\)".*/\1/p' "$f" | head -n1)
    case "$mode" in
      sim) kind=sim ;;
      emu|ip|loopback) kind=rt ;;
      constellation) echo "$name|sim|experiments/constellation/run.sh $f"; continue ;;
      *) echo "run_all.sh: $f: no mode line (expected mode = \"sim\" | \"emu\" | \"ip\" | \"loopback\" | \"constellation\")" >&2; exit 2 ;;
    esac
    echo "$name|$kind|bench $f"
  done
  # seed 004's emulated Table IV point, the same file in the simulator with 20 seeds
  echo "seed004_table4_emu_sim|sim|bench experiments/seed004_table4_emu.toml --mode sim --repetitions 20 --out experiments/results/seed004_table4_emu_sim"
  # seed 004's TCP tables: repetitions 4 and 5 (seeds 4-5) beside the file's three, pooled by summarize_seed004.py
  echo "seed004_tcp_tables_seeds4_5|rt|bench experiments/seed004_tcp_tables.toml --seed 4 --repetitions 2 --out experiments/results/seed004_tcp_tables_seeds4_5"
  echo "seed001_table1_delay|calc|python3 experiments/seed001_delay_model.py"
}

mapfile -t all < <(list_jobs)
# --only: an exact job name selects that job alone; anything else is a regular expression over the names.
exact=0
for j in "${all[@]}"; do
  if [ -n "$only" ] && [ "${j%%|*}" = "$only" ]; then exact=1; fi
done
selected=()
for j in "${all[@]}"; do
  name=${j%%|*}
  if [ -z "$only" ]; then
    selected+=("$j")
  elif [ "$exact" = 1 ]; then
    if [ "$name" = "$only" ]; then selected+=("$j"); fi
  else
    rc=0
    grep -Eq -- "$only" <<<"$name" 2>/dev/null || rc=$?
    if [ "$rc" = 0 ]; then
      selected+=("$j")
    elif [ "$rc" -gt 1 ]; then
      echo "run_all.sh: --only '$only': not a valid extended regular expression (grep -E)" >&2
      exit 2
    fi
  fi
done
if [ ${#selected[@]} -eq 0 ]; then
  echo "run_all.sh: no job matches --only '$only'; jobs: $(printf '%s\n' "${all[@]}" | cut -d'|' -f1 | tr '\n' ' ')" >&2
  exit 2
fi

# The command a job runs (bench jobs get the executor's flags).
command_of() {
  local kind=$1 cmd=$2
  case "$cmd" in
    bench\ *)
      local args=${cmd#bench }
      if [ "$kind" = sim ]; then
        echo "$bin bench $args --jobs $jobs --quiet"
      elif [ "$slurm" = 1 ]; then
        local extra="" a
        for a in ${RUN_ALL_SBATCH_ARGS:-}; do extra+=" --sbatch-arg=$a"; done
        echo "$bin bench $args --executor slurm --wait$extra --quiet"
      else
        echo "$bin bench $args --quiet"
      fi ;;
    *) echo "$cmd" ;;
  esac
}

if [ "$dry" = 1 ]; then
  for j in "${selected[@]}"; do
    IFS='|' read -r name kind cmd <<<"$j"
    printf '%-32s %-4s %s\n' "$name" "$kind" "$(command_of "$kind" "$cmd")"
  done
  exit 0
fi

# Results name the commit they ran on: refuse a tree whose code or experiment inputs differ from it.
changes=$(git status --porcelain --untracked-files=no -- crates Cargo.toml Cargo.lock testdata experiments/*.toml \
  experiments/*.py 2>/dev/null || true)
if [ -n "$changes" ] && [ "$allow_dirty" = 0 ]; then
  echo "run_all.sh: uncommitted changes to the code or the experiments' inputs; commit them first (the results" >&2
  echo "record the commit they ran on), or pass --allow-dirty:" >&2
  echo "$changes" >&2
  exit 2
fi

if [ "$build" = 1 ]; then
  cargo build --release -p dtnkit --locked -q
fi
[ -x "$bin" ] || { echo "run_all.sh: $bin: no release binary (cargo build --release -p dtnkit)" >&2; exit 2; }

failed=()
log=experiments/results/run_all.log
mkdir -p experiments/results
for j in "${selected[@]}"; do
  IFS='|' read -r name kind cmd <<<"$j"
  c=$(command_of "$kind" "$cmd")
  before=$(cut -d' ' -f1-3 /proc/loadavg)
  t0=$(date +%s)
  echo "== $name ($kind): $c"
  if [ "$kind" = sim ]; then
    # the simulator is deterministic: a lower priority changes only its wall time
    nice -n 10 $c || failed+=("$name")
  else
    $c || failed+=("$name")
  fi
  echo "$name $(date -u +%FT%TZ) kind $kind wall $(( $(date +%s) - t0 )) s load(1,5,15 min) before $before after $(cut -d' ' -f1-3 /proc/loadavg) nproc $(nproc)" >> "$log"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "run_all.sh: failed: ${failed[*]}" >&2
  exit 1
fi
echo "run_all.sh: ${#selected[@]} jobs done; check the simulator results with cargo nextest run -p dtnkit --test bench_guard"
