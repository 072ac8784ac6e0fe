#!/usr/bin/env bash
# Topology-aware versus flat: all-reduce time for NODES "nodes" x PER ranks,
# each node a network namespace (tests/multinode/netns_lib.sh: ranks on a node
# share memory, nodes talk over veth links shaped with tbf to RATE), ranks
# dealt round-robin over the nodes (chorusrun --map-by node, as mpirun
# --map-by node does), so rank order does not follow the hierarchy.
#   A "topo": the default: rings/trees/hierarchical schedules from the graph search
#   B "flat": FLAT_ENV (default CHORUS_GRAPH_FLAT=1 NCCL_ALGO=ring): one ring in rank order
# Alternates A and B, REPS times, and prints medians. Needs root.
#
#   benchmarks/compare/run_topo_compare.sh [build-dir]
# Knobs: NODES=4 PER=2 RATE=1gbit SIZES="1K 1M 64M" REPS=3 ITERS=3 WARMUP=1 FLAT_ENV=... OUTDIR=... SUMMARIZE=<dir>
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
source "$root/tests/multinode/netns_lib.sh"
BUILD=${1:-build}
BIN=$BUILD/bin
NODES=${NODES:-4}
PER=${PER:-2}
RATE=${RATE:-1gbit}
SIZES=${SIZES:-"1K 1M 64M"}
REPS=${REPS:-3}
ITERS=${ITERS:-3}
WARMUP=${WARMUP:-1}
FLAT_ENV=${FLAT_ENV:-"CHORUS_GRAPH_FLAT=1 NCCL_ALGO=ring"}
OUTDIR=${SUMMARIZE:-${OUTDIR:-$(mktemp -d /tmp/chorus-topocmp.XXXXXX)}}
mkdir -p "$OUTDIR"
PREFIX=chtc$$
SUBNET=$((200 + $$ % 50))

run() {  # variant size out
  local variant=$1 size=$2 out=$3 i pids=() port=$(netns_port)
  local -a extra=()
  [ "$variant" = flat ] && read -r -a extra <<<"$FLAT_ENV"
  for ((i = 0; i < NODES; i++)); do
    CHORUS_MODE=host NCCL_NET=Socket NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING \
      netns_run "$PREFIX" "$i" env "${extra[@]}" timeout 900 \
      "$BIN/chorusrun" -n "$PER" --nnodes "$NODES" --node-rank "$i" --map-by node \
      --master "$(netns_addr "$PREFIX" 0):$port" \
      "$BIN/all_reduce_perf" -b "$size" -e "$size" -n "$ITERS" -w "$WARMUP" -d float >"$out.node$i" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || echo "run_topo_compare: $variant $size failed, see $out.node*" >&2; done
  mv "$out.node0" "$out"
}

if [ -z "${SUMMARIZE:-}" ]; then
  netns_supported >/dev/null || { echo "run_topo_compare: needs root and network namespaces" >&2; exit 1; }
  trap 'netns_destroy "$PREFIX"' EXIT
  netns_create "$PREFIX" "$NODES" "$SUBNET" "$RATE"
  cut -d' ' -f1 /proc/loadavg >"$OUTDIR/load_at_start.txt"
  for rep in $(seq 1 "$REPS"); do
    for size in $SIZES; do
      for variant in topo flat; do
        echo "run_topo_compare: rep $rep, $size, $variant" >&2
        run "$variant" "$size" "$OUTDIR/${variant}_${size}_r$rep.txt"
      done
    done
  done
fi
echo "run_topo_compare: raw logs in $OUTDIR" >&2
python3 - "$OUTDIR" "$SIZES" "$NODES" "$PER" "$RATE" <<'PY'
import glob, statistics, sys
outdir, sizes, nodes, per, rate = sys.argv[1], sys.argv[2].split(), *sys.argv[3:6]
def t(path):
    for line in open(path):
        f = line.split()
        if not line.startswith("#") and len(f) >= 13:
            try: return float(f[5])
            except ValueError: pass
    return None
print(f"all_reduce (float sum, out-of-place), {nodes} nodes x {per} ranks, ranks round-robin over nodes, "
      f"inter-node links tbf {rate}; time per call in us, median of the runs\n")
print("| size | topology-aware (us) | flat ring (us) | flat / topology-aware | algorithm chosen |")
print("|---:|---:|---:|---:|---|")
for s in sizes:
    med = {}
    for v in ("topo", "flat"):
        vals = [x for x in (t(p) for p in glob.glob(f"{outdir}/{v}_{s}_r*.txt")) if x is not None]
        med[v] = statistics.median(vals) if vals else None
    algo = "-"
    nbytes = int(s[:-1]) * {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[s[-1]] if s[-1] in "KMG" else int(s)
    for p in glob.glob(f"{outdir}/topo_{s}_r*.txt"):
        for line in open(p):
            if f'"coll":"AllReduce","bytes":{nbytes},' in line and '"winner"' in line:
                w = line.split('"winner"')[1]
                algo = w.split('"algo":"')[1].split('"')[0] + "/" + w.split('"proto":"')[1].split('"')[0] + \
                       " x" + w.split('"nch":')[1].split(',')[0]
    a, b = med["topo"], med["flat"]
    ratio = f"{b / a:.2f}" if a and b else "-"
    f = lambda x: "-" if x is None else f"{x:.0f}"
    print(f"| {s} | {f(a)} | {f(b)} | {ratio} | {algo} |")
PY
