#!/usr/bin/env bash
# Wire formats on a slow network, for docs/performance.md (issue 12): a 64 MiB
# float all-reduce on 4 "nodes" x 2 ranks, each node a network namespace whose
# veth link is shaped to RATE (1gbit) with tbf on both ends
# (tests/multinode/netns_lib.sh), native against --wire bf16 / fp8 / int8 and
# --deterministic 1, REPS times in alternation, reporting median times and the
# speed-up over native; then the same job on one host (8 processes, shm) to
# show what compression costs where the link is not the bottleneck; and the
# bytes on the wire per operation and rank that all_reduce_perf reads from
# chorusCommGetStats, as a ratio to native. Builds nothing; needs root.
#
#   benchmarks/compare/run_wire_compare.sh [build-dir]        (default: build)
#
# Knobs: VARIANTS="native bf16 fp8 int8 det" (FORMAT-flat: with CHORUS_WIRE_HOSTS=0) REPS=3 BYTES=64M ITERS=3 WARMUP=1
#        BENCH=all_reduce_perf (or reduce_scatter_perf: the same runs of a reduce-scatter)
#        RATE=1gbit NODES=4 PER_NODE=2 SHM=1 (0: skip the one-host runs)
#        OUTDIR=<raw logs> SUMMARIZE=<dir of an earlier run: only summarize>
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
source "$root/tests/multinode/netns_lib.sh"
BUILD=${1:-build}
BIN=$BUILD/bin
BENCH=${BENCH:-all_reduce_perf}
VARIANTS=${VARIANTS:-"native bf16 fp8 int8 det"}
REPS=${REPS:-3}
BYTES=${BYTES:-64M}
RATE=${RATE:-1gbit}
NODES=${NODES:-4}
PER_NODE=${PER_NODE:-2}
SHM=${SHM:-1}
SWEEP=(-b "$BYTES" -e "$BYTES" -n "${ITERS:-3}" -w "${WARMUP:-1}" -d float -c 0)
OUTDIR=${SUMMARIZE:-${OUTDIR:-$(mktemp -d /tmp/chorus-wirecmp.XXXXXX)}}
mkdir -p "$OUTDIR"
PREFIX=chwc$$
SUBNET=$((100 + $$ % 50))

die() { echo "run_wire_compare: $*" >&2; exit 1; }

flags_of() {  # variant -> $BENCH flags
  case ${1%-flat} in
    native) echo "--wire native" ;;
    det) echo "--deterministic 1" ;;
    *) echo "--wire ${1%-flat}" ;;
  esac
}

hosts_of() {  # variant -> CHORUS_WIRE_HOSTS (FORMAT-flat: the flat form across hosts)
  case $1 in
    *-flat) echo 0 ;;
    *) echo 1 ;;
  esac
}

netns_job() {  # variant out
  local i pids=() port=$(netns_port)
  for ((i = 0; i < NODES; i++)); do
    # shellcheck disable=SC2046
    CHORUS_MODE=host NCCL_NET=Socket CHORUS_WIRE_HOSTS=$(hosts_of "$1") netns_run "$PREFIX" "$i" timeout 900 "$BIN/chorusrun" -n "$PER_NODE" \
      --nnodes "$NODES" --node-rank "$i" --master "$(netns_addr "$PREFIX" 0):$port" "$BIN/$BENCH" \
      "${SWEEP[@]}" $(flags_of "$1") >"$2.node$i" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || echo "run_wire_compare: netns $1 failed, see $2.node*" >&2; done
  mv "$2.node0" "$2"
}

shm_job() {  # variant out
  # shellcheck disable=SC2046
  CHORUS_MODE=host CHORUS_WIRE_HOSTS=$(hosts_of "$1") timeout 900 "$BIN/chorusrun" -n $((NODES * PER_NODE)) "$BIN/$BENCH" "${SWEEP[@]}" \
    $(flags_of "$1") >"$2" 2>&1 || echo "run_wire_compare: shm $1 failed, see $2" >&2
}

if [ -z "${SUMMARIZE:-}" ]; then
  [ -x "$BIN/$BENCH" ] && [ -x "$BIN/chorusrun" ] || die "build $BIN first"
  netns_supported >/dev/null || die "needs root and network namespaces"
  trap 'netns_destroy "$PREFIX"' EXIT
  netns_create "$PREFIX" "$NODES" "$SUBNET" "$RATE" || die "could not create the namespaces"
  cut -d' ' -f1 /proc/loadavg >"$OUTDIR/load_at_start.txt"
  nproc >"$OUTDIR/nproc.txt"
  for rep in $(seq 1 "$REPS"); do
    for v in $VARIANTS; do
      echo "run_wire_compare: rep $rep, $v, ${NODES}x$PER_NODE over $RATE" >&2
      netns_job "$v" "$OUTDIR/netns_${v}_r$rep.txt"
      if [ "$SHM" = 1 ]; then
        echo "run_wire_compare: rep $rep, $v, one host (shm)" >&2
        shm_job "$v" "$OUTDIR/shm_${v}_r$rep.txt"
      fi
    done
  done
  cut -d' ' -f1 /proc/loadavg >"$OUTDIR/load_at_end.txt"
fi

echo "run_wire_compare: raw logs in $OUTDIR" >&2
python3 - "$OUTDIR" "$VARIANTS" "$RATE" "$NODES" "$PER_NODE" "$BENCH" <<'PY'
import glob, statistics, sys
outdir, variants, rate, nodes, per = sys.argv[1], sys.argv[2].split(), sys.argv[3], sys.argv[4], sys.argv[5]
coll = "reduce-scatter" if sys.argv[6].startswith("reduce_scatter") else "all-reduce"

def parse(path):  # (out-of-place time us, wire bytes, of them network bytes, per op and rank) of the one row
    t = wire = net = None
    try:
        for line in open(path):
            f = line.split()
            if line.startswith("#  bytes on the wire"):
                wire = float(f[f.index("out-of-place") + 1])
                net = float(f[f.index("network:") + 2]) if "network:" in f else 0.0
            elif not line.startswith("#") and len(f) >= 13:
                try:
                    t = float(f[5])
                except ValueError:
                    pass
    except OSError:
        pass
    return t, wire, net

def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None

def load(f):
    try:
        return open(f"{outdir}/{f}").read().strip()
    except OSError:
        return "?"

names = {"native": "native fp32", "bf16": "bf16", "fp8": "fp8 e4m3", "int8": "int8", "det": "deterministic"}
names.update({f"{k}-flat": f"{v}, flat form (CHORUS_WIRE_HOSTS=0)" for k, v in list(names.items())})
print(f"load average {load('load_at_start.txt')} at start, {load('load_at_end.txt')} at end, "
      f"{load('nproc.txt')} cores\n")
for setup, label in (("netns", f"{nodes} nodes x {per} ranks, veth shaped to {rate} (tbf)"),
                     ("shm", f"one host, {int(nodes) * int(per)} processes (shm)")):
    runs = {v: [parse(p) for p in sorted(glob.glob(f"{outdir}/{setup}_{v}_r*.txt"))] for v in variants}
    if not any(runs.values()):
        continue
    times = {v: med(t for t, _, _ in r) for v, r in runs.items()}
    wires = {v: med(w for _, w, _ in r) for v, r in runs.items()}
    nets = {v: med(n for _, _, n in r) for v, r in runs.items()}
    base_t, base_w, base_n = times.get("native"), wires.get("native"), nets.get("native")
    print(f"#### {label}, 64 MiB float {coll}, median of {max(len(r) for r in runs.values())}\n")
    print("| variant | time (ms) | speed-up over native | bytes sent per op and rank | / native "
          "| of them over the network | / native |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    num = lambda x: "-" if x is None else f"{x:.0f}"
    rel = lambda x, b: f"{x / b:.3f}" if x is not None and b else "-"
    for v in variants:
        t, w, n = times[v], wires[v], nets[v]
        sp = f"{base_t / t:.2f}x" if t and base_t else "-"
        print(f"| {names.get(v, v)} | {'-' if t is None else f'{t / 1000:.1f}'} | {sp} | "
              f"{num(w)} | {rel(w, base_w)} | {num(n)} | {rel(n, base_n)} |")
    print()
PY
