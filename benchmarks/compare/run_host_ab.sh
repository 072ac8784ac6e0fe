#!/usr/bin/env bash
# A/B of two Chorus builds in host mode, with OpenMPI's MPI_Allreduce as the
# outside reference: all_reduce_perf through chorusrun, builds A and B
# alternated (A B in odd rounds, B A in even ones, so a drift in the machine
# hits both alike), ROUNDS rounds, one run per size; prints min/median/max
# time per cell and the B/A ratio of medians (below 1: B is faster). Builds
# nothing.
#
#   benchmarks/compare/run_host_ab.sh BUILD_A BUILD_B
#
# Knobs (environment):
#   ROUNDS=3  RANKS="2 4"  SIZES="8 1K 1M 64M 256M"
#   A_ENV / B_ENV: extra VAR=value words for A's / B's runs (e.g. B_ENV="CHORUS_BIND_TO=none"
#     compares binding with one build: BUILD_A = BUILD_B)
#   MPI=1 (0: no OpenMPI runs)  MPI_BUILD (where mpi_allreduce_bench is; default BUILD_A)
#   MPI_TUNABLES=glibc.malloc.hugetlb=1: GLIBC_TUNABLES for the OpenMPI ranks (empty: none); see below
#   OUTDIR=<raw logs; a fresh /tmp directory by default>  RUN_TIMEOUT=600 (seconds per run)
#   SUMMARIZE=<dir>: run nothing, re-print the tables from an earlier run's logs
#
# OpenMPI runs as its users run it on one machine: mpirun --bind-to core (or
# --bind-to none --oversubscribe with more ranks than cores), the ob1 PML
# with the shared-memory BTL (--mca btl vader,self). Its all-reduce allocates
# a temporary buffer per call; on VMs where first-touch page faults are slow
# (10 us per 4 KiB page measured here) that alone caps it near 0.2 GB/s, so
# its ranks get glibc's transparent-huge-page malloc (MPI_TUNABLES). The
# table prints its busbw next to single-thread memcpy_bw as a sanity check.
#
# Every run's load average is logged; the script warns above half the CPUs.
set -euo pipefail

A=${1:-}
B=${2:-}
ROUNDS=${ROUNDS:-3}
RANKS=${RANKS:-"2 4"}
SIZES=${SIZES:-"8 1K 1M 64M 256M"}
MPI=${MPI:-1}
MPI_BUILD=${MPI_BUILD:-$A}
MPI_TUNABLES=${MPI_TUNABLES-glibc.malloc.hugetlb=1}
RUN_TIMEOUT=${RUN_TIMEOUT:-600}
OUTDIR=${SUMMARIZE:-${OUTDIR:-$(mktemp -d /tmp/chorus-host-ab.XXXXXX)}}
mkdir -p "$OUTDIR"

die() { echo "run_host_ab: $*" >&2; exit 1; }
command -v python3 >/dev/null || die "python3 is needed for the tables"

# Iterations per size: enough for ~0.1-1 s per run on an idle 2-core VM.
iters_for() {
  case $1 in
    8|1K) echo "-n 20000 -w 2000" ;;
    1M) echo "-n 200 -w 20" ;;
    64M) echo "-n 10 -w 2" ;;
    *) echo "-n 4 -w 1" ;;
  esac
}

load() { cut -d' ' -f1 /proc/loadavg; }

# run_one TAG BUILD ENV NRANKS SIZE ROUND: one all_reduce_perf run (or OpenMPI's for TAG mpi).
run_one() {
  local tag=$1 build=$2 envs=$3 n=$4 size=$5 round=$6
  local out="$OUTDIR/${tag}_n${n}_s${size}_r${round}.txt"
  local flags=(-b "$size" -e "$size" $(iters_for "$size") -c 0)
  echo "# load $(load) at start; $(date -u +%FT%TZ)" > "$out"
  echo "run_host_ab: $tag, $n ranks, $size, round $round (load $(load))" >&2
  if [ "$tag" = mpi ]; then
    local mpirun=(mpirun -np "$n" --mca pml ob1 --mca btl vader,self)
    [ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
    if [ "$n" -le "$(nproc)" ]; then mpirun+=(--bind-to core); else mpirun+=(--bind-to none --oversubscribe); fi
    [ -n "$MPI_TUNABLES" ] && mpirun+=(-x "GLIBC_TUNABLES=$MPI_TUNABLES")
    timeout "$RUN_TIMEOUT" "${mpirun[@]}" "$MPI_BUILD/bin/mpi_allreduce_bench" "${flags[@]}" >> "$out" 2>&1 ||
      echo "run_host_ab: OpenMPI run failed, see $out" >&2
  else
    # shellcheck disable=SC2086
    env CHORUS_MODE=host LD_LIBRARY_PATH="$build" $envs timeout "$RUN_TIMEOUT" "$build/bin/chorusrun" -n "$n" \
      -- "$build/bin/all_reduce_perf" "${flags[@]}" -d float -o sum >> "$out" 2>&1 ||
      echo "run_host_ab: $tag run failed, see $out" >&2
  fi
}

if [ -z "${SUMMARIZE:-}" ]; then
  [ -n "$A" ] && [ -n "$B" ] || die "usage: run_host_ab.sh BUILD_A BUILD_B"
  for d in "$A" "$B"; do
    [ -x "$d/bin/all_reduce_perf" ] && [ -x "$d/bin/chorusrun" ] || die "$d/bin has no all_reduce_perf/chorusrun"
  done
  [ -x "$A/bin/memcpy_bw" ] || die "build $A/bin/memcpy_bw first (target chorus_compare)"
  if [ "$MPI" = 1 ] && ! { [ -x "$MPI_BUILD/bin/mpi_allreduce_bench" ] && command -v mpirun >/dev/null; }; then
    echo "run_host_ab: no mpi_allreduce_bench or mpirun: no OpenMPI runs" >&2
    MPI=0
  fi
  if python3 -c "import sys; sys.exit(0 if float('$(load)') > 0.5 * $(nproc) else 1)"; then
    echo "run_host_ab: warning: load average $(load) on $(nproc) CPUs; numbers will be noisy" >&2
  fi
  {
    echo "A=$A A_ENV=${A_ENV:-}"
    echo "B=$B B_ENV=${B_ENV:-}"
    echo "cpus=$(nproc) model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
    echo "mpi_tunables=$MPI_TUNABLES"
  } > "$OUTDIR/setup.txt"
  for round in $(seq 1 "$ROUNDS"); do
    "$A/bin/memcpy_bw" > "$OUTDIR/memcpy_r$round.txt"
    order="A B"
    [ $((round % 2)) = 0 ] && order="B A"
    for n in $RANKS; do
      for size in $SIZES; do
        for side in $order; do
          if [ "$side" = A ]; then run_one A "$A" "${A_ENV:-}" "$n" "$size" "$round"
          else run_one B "$B" "${B_ENV:-}" "$n" "$size" "$round"; fi
        done
        [ "$MPI" = 1 ] && run_one mpi "" "" "$n" "$size" "$round"
      done
    done
  done
fi

echo "run_host_ab: raw logs in $OUTDIR" >&2
python3 - "$OUTDIR" <<'EOF'
import glob, os, re, statistics, sys

outdir = sys.argv[1]
units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}

def nbytes(text):
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)

cells, loads = {}, []
for path in glob.glob(os.path.join(outdir, "*_n*_s*_r*.txt")):
    tag, n, size, _ = re.match(r"(\w+?)_n(\d+)_s(\w+)_r(\d+)\.txt", os.path.basename(path)).groups()
    for line in open(path):
        m = re.match(r"# load ([\d.]+)", line)
        if m:
            loads.append(float(m.group(1)))
        f = line.split()
        if line.startswith("#") or len(f) < 13 or not f[0].isdigit():
            continue
        try:  # out-of-place time (us) and busbw (GB/s)
            cells.setdefault((tag, int(n), nbytes(size)), []).append((float(f[5]), float(f[7])))
        except ValueError:
            pass
memcpy = [float(m.group(1)) for p in glob.glob(os.path.join(outdir, "memcpy_r*.txt"))
          for m in [re.search(r"memcpy_GBps\s+([\d.]+)", open(p).read())] if m]
setup = open(os.path.join(outdir, "setup.txt")).read().strip() if os.path.exists(os.path.join(outdir, "setup.txt")) else ""

def human(b):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024 or unit == "GiB":
            return f"{b:g} {unit}"
        b /= 1024

def fmt(t):
    return f"{t:.2f}" if t < 10 else (f"{t:.1f}" if t < 1000 else f"{t:.0f}")

def spread(v):
    t = [x for x, _ in v]
    return f"{fmt(min(t))} / {fmt(statistics.median(t))} / {fmt(max(t))}"

mc = statistics.median(memcpy) if memcpy else 0.0
print(setup)
print(f"load average at the runs' start: min {min(loads, default=0):.2f}, max {max(loads, default=0):.2f}; "
      f"single-thread memcpy 256 MiB: {', '.join(f'{x:.2f}' for x in sorted(memcpy))} GB/s\n")
for n in sorted({k[1] for k in cells}):
    print(f"#### all-reduce, {n} processes: time in us, min / median / max over the runs\n")
    print("| size | A | B | B/A (median) | OpenMPI | OpenMPI/A | OpenMPI busbw/memcpy |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for s in sorted({k[2] for k in cells if k[1] == n}):
        a, b, m = (cells.get((t, n, s)) for t in ("A", "B", "mpi"))
        med = lambda v: statistics.median(x for x, _ in v)
        row = [human(s), spread(a) if a else "-", spread(b) if b else "-",
               f"{med(b) / med(a):.2f}" if a and b else "-", spread(m) if m else "-",
               f"{med(m) / med(a):.2f}" if a and m else "-",
               f"{statistics.median(y for _, y in m) / mc:.2f}" if m and mc else "-"]
        print("| " + " | ".join(row) + " |")
    print()
EOF
