#!/usr/bin/env bash
# Runs the peer comparison on this machine and prints a markdown table for
# docs/performance.md: Chorus all_reduce_perf (host mode, processes started
# by chorusrun) against OpenMPI MPI_Allreduce and Gloo's ring all-reduce, at
# each rank count, REPS times in alternation (so slow drifts in the machine
# hit every library alike), reporting medians. Builds nothing.
#
#   benchmarks/compare/run_compare.sh [build-dir]        (default: build-bench)
#
# Knobs (environment): RANKS="2 4"  REPS=3  MINBYTES=8  MAXBYTES=256M  FACTOR=2  ITERS=10
#   WARMUP=3  CHECK=0 (1: also verify results; not timed)  OUTDIR=<dir for raw logs>
#   RUN_TIMEOUT=1200 (seconds per run)
#   SUMMARIZE=<dir>: run nothing, just print the tables for the raw logs of an earlier run
set -euo pipefail

BUILD=${1:-build-bench}
BIN=$BUILD/bin
RANKS=${RANKS:-"2 4"}
REPS=${REPS:-3}
MINBYTES=${MINBYTES:-8}
MAXBYTES=${MAXBYTES:-256M}
FACTOR=${FACTOR:-2}
ITERS=${ITERS:-10}
WARMUP=${WARMUP:-3}
CHECK=${CHECK:-0}
RUN_TIMEOUT=${RUN_TIMEOUT:-1200}
OUTDIR=${SUMMARIZE:-${OUTDIR:-$(mktemp -d /tmp/chorus-compare.XXXXXX)}}
mkdir -p "$OUTDIR"

die() { echo "run_compare: $*" >&2; exit 1; }
[ -x "$BIN/all_reduce_perf" ] && [ -x "$BIN/chorusrun" ] || die "build $BIN/all_reduce_perf and $BIN/chorusrun first"
[ -x "$BIN/memcpy_bw" ] || die "build $BIN/memcpy_bw first (target chorus_compare)"
command -v python3 >/dev/null || die "python3 is needed to compute medians"

LIBS="chorus"
if [ -x "$BIN/mpi_allreduce_bench" ] && command -v mpirun >/dev/null; then LIBS="$LIBS mpi"
else echo "run_compare: no mpi_allreduce_bench/mpirun, skipping OpenMPI" >&2; fi
if [ -x "$BIN/gloo_allreduce_bench" ]; then LIBS="$LIBS gloo"
else echo "run_compare: no gloo_allreduce_bench, skipping Gloo" >&2; fi

# OpenMPI refuses root without this flag; --oversubscribe lets 4 ranks run on fewer cores.
MPIRUN=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)

SWEEP=(-b "$MINBYTES" -e "$MAXBYTES" -f "$FACTOR" -n "$ITERS" -w "$WARMUP" -c "$CHECK")

NCPU=$(nproc)
LOAD=$(cut -d' ' -f1 /proc/loadavg)
if python3 -c "import sys; sys.exit(0 if float('$LOAD') > 0.5 * $NCPU else 1)"; then
  echo "run_compare: warning: load average $LOAD on $NCPU CPUs; numbers will be noisy" >&2
fi

run_one() {  # lib nranks rep
  local lib=$1 n=$2 rep=$3 out="$OUTDIR/$1_n$2_r$3.txt"
  echo "run_compare: $lib, $n ranks, run $rep" >&2
  case $lib in
    chorus) CHORUS_MODE=host timeout "$RUN_TIMEOUT" "$BIN/chorusrun" -n "$n" "$BIN/all_reduce_perf" \
              "${SWEEP[@]}" -d float -o sum > "$out" ;;
    mpi)    timeout "$RUN_TIMEOUT" "${MPIRUN[@]}" -np "$n" "$BIN/mpi_allreduce_bench" "${SWEEP[@]}" > "$out" ;;
    gloo)   timeout "$RUN_TIMEOUT" "$BIN/chorusrun" -n "$n" "$BIN/gloo_allreduce_bench" "${SWEEP[@]}" > "$out" ;;
  esac || echo "run_compare: $lib with $n ranks (run $rep) failed; see $out" >&2
}

if [ -z "${SUMMARIZE:-}" ]; then
  echo "$LOAD" > "$OUTDIR/load_at_start.txt"
  for rep in $(seq 1 "$REPS"); do
    "$BIN/memcpy_bw" > "$OUTDIR/memcpy_r$rep.txt"
    for n in $RANKS; do
      for lib in $LIBS; do run_one "$lib" "$n" "$rep"; done
    done
  done
fi

echo "run_compare: raw logs in $OUTDIR" >&2
CPU=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
[ -f "$OUTDIR/load_at_start.txt" ] && LOAD=$(cat "$OUTDIR/load_at_start.txt")
python3 - "$OUTDIR" "$RANKS" "$LIBS" "$(nproc)" "$REPS" "$CPU" "$LOAD" <<'EOF'
import glob, os, re, statistics, sys

outdir, ranks, libs, ncpu, reps, cpu, load = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), *sys.argv[4:8]
names = {"chorus": "Chorus", "mpi": "OpenMPI", "gloo": "Gloo"}

def rows(path):
    """size -> (time_us, busbw) from the out-of-place columns."""
    out = {}
    for line in open(path):
        f = line.split()
        if line.startswith("#") or len(f) < 13:
            continue
        try:
            out[int(f[0])] = (float(f[5]), float(f[7]))
        except ValueError:
            pass
    return out

def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:g} {unit}"
        n /= 1024

memcpy = []
for p in glob.glob(os.path.join(outdir, "memcpy_r*.txt")):
    m = re.search(r"memcpy_GBps\s+([\d.]+)", open(p).read())
    if m:
        memcpy.append(float(m.group(1)))
mc = statistics.median(memcpy) if memcpy else 0.0

print(f"{ncpu} CPUs ({cpu}), load average {load} at the start. Single-thread memcpy at 256 MiB: "
      f"**{mc:.2f} GB/s** (median of {len(memcpy)}). Each cell is the median of {reps} alternating runs; "
      "out-of-place, float sum; Chorus in host mode, one process per rank (chorusrun); OpenMPI with its "
      "default shared-memory path; Gloo AllreduceRing over TCP on 127.0.0.1.\n")
for n in ranks:
    data = {}
    for lib in libs:
        per = {}
        for p in sorted(glob.glob(os.path.join(outdir, f"{lib}_n{n}_r*.txt"))):
            for size, v in rows(p).items():
                per.setdefault(size, []).append(v)
        data[lib] = {s: (statistics.median(t for t, _ in v), statistics.median(b for _, b in v))
                     for s, v in per.items()}
    sizes = sorted(set().union(*[d.keys() for d in data.values()]))
    print(f"#### All-reduce, {n} processes\n")
    head = ["size"]
    for lib in libs:
        head += [f"{names[lib]} time (us)", f"{names[lib]} busbw (GB/s)"]
    head += [f"{names[lib]} busbw/memcpy" for lib in libs]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join(["---:"] * len(head)) + "|")
    for s in sizes:
        cells = [human(s)]
        for lib in libs:
            t, b = data[lib].get(s, (None, None))
            cells += ["-" if t is None else (f"{t:.1f}" if t < 1000 else f"{t:.0f}"),
                      "-" if b is None else f"{b:.2f}"]
        for lib in libs:
            b = data[lib].get(s, (None, None))[1]
            cells.append("-" if b is None or mc == 0 else f"{b / mc:.2f}")
        print("| " + " | ".join(cells) + " |")
    print()
EOF
