#!/usr/bin/env bash
# Network-transport comparison for docs/performance.md: Chorus all_reduce_perf
# across two "nodes" (socket and UCX backends) next to iperf3's TCP throughput
# on the same link (one stream; two independent pairs in opposite directions,
# free and with each pair's ends on different CPUs) and OpenMPI's TCP path (--mca btl tcp,self), in the same
# run, REPS times in alternation, reporting medians. Builds nothing; needs root
# for the veth link (network namespaces, tests/multinode/netns_lib.sh).
#
#   benchmarks/compare/run_net_compare.sh [build-dir]     (default: build)
#
# Links: lo   two process groups in this namespace, each with its own
#             NCCL_HOSTID, talking over 127.0.0.1
#        veth two network namespaces joined by a veth pair through a bridge
#             (RATE=1gbit adds tbf shaping on both ends)
# Knobs: LINKS="lo veth" BACKENDS="Socket UCX" LAYOUTS="2x1 2x2" REPS=3 MINBYTES=8
#        MAXBYTES=256M FACTOR=4 ITERS=5 WARMUP=2 RATE= OUTDIR=<raw logs> SUMMARIZE=<dir>
#        BEFORE_BIN=<dir with chorusrun, all_reduce_perf and libnccl.so.2 of another
#        build>: also run it ("Chorus <backend> before"), alternating with the others
#        VARIANTS="label:VAR=VAL[,VAR=VAL] ...": also run each backend with these
#        settings ("Chorus <backend>-label"), alternating with the others, e.g.
#        VARIANTS="noinline:CHORUS_NET_INLINE=0"
#        MPI_EXTRA="...": extra mpirun arguments (over veth, "--mca mpi_yield_when_idle 1"
#        is added by itself when the "nodes" together have more ranks than the machine
#        has cores, as OpenMPI does on its own for an oversubscribed host)
#        MIN_MPI_RATIO=0.5: before measuring, OpenMPI's 2x1 busbw at 8 MiB must reach
#        this fraction of iperf3's both-ways rate (two pairs) on each link, else the run
#        stops (a misconfigured OpenMPI makes every ratio against it meaningless)
#        MPI_START_S=60: an OpenMPI launch across namespaces that has printed nothing
#        after this many seconds is stopped and tried again (at most 3 launches)
#        NETNS_TCP_CC="cubic reno": the namespaces' TCP congestion control (netns_lib.sh;
#        unset: the host's). With bbr and no fq qdisc a veth reorders each flow
#        (docs/performance.md, "Reordering on the simulated link")
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
source "$root/tests/multinode/netns_lib.sh"
BUILD=${1:-build}
BIN=$BUILD/bin
LINKS=${LINKS:-"lo veth"}
BACKENDS=${BACKENDS:-"Socket UCX"}
LAYOUTS=${LAYOUTS:-"2x1 2x2"}
REPS=${REPS:-3}
SWEEP=(-b "${MINBYTES:-8}" -e "${MAXBYTES:-256M}" -f "${FACTOR:-4}" -n "${ITERS:-5}" -w "${WARMUP:-2}")
RATE=${RATE:-}
BEFORE_BIN=${BEFORE_BIN:-}
MIN_MPI_RATIO=${MIN_MPI_RATIO:-0.5}
VARIANTS=${VARIANTS:-}
OUTDIR=${SUMMARIZE:-${OUTDIR:-$(mktemp -d /tmp/chorus-netcmp.XXXXXX)}}
mkdir -p "$OUTDIR"
PREFIX=chnc$$
SUBNET=$((150 + $$ % 50))
MPI_START_S=${MPI_START_S:-60}
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --mca btl tcp,self)
# Extra mpirun arguments (MPI_EXTRA).
read -r -a _mpi_extra <<<"${MPI_EXTRA:-}"
MPIRUN+=("${_mpi_extra[@]}")

die() { echo "run_net_compare: $*" >&2; exit 1; }

chorus_job() {  # link layout backend out [bin dir] [VAR=VAL,...]
  local link=$1 nn=${2%x*} per=${2#*x} net=$3 out=$4 bin=${5:-$BIN} i pids=()
  local -a extra=()
  [ -n "${6:-}" ] && IFS=, read -r -a extra <<<"$6"
  local port=$(netns_port)
  local libpath="$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  for ((i = 0; i < nn; i++)); do
    local -a cmd=("$bin/chorusrun" -n "$per" --nnodes "$nn" --node-rank "$i")
    if [ "$link" = lo ]; then
      env "${extra[@]}" CHORUS_MODE=host NCCL_NET=$net NCCL_HOSTID="node$i" NCCL_SOCKET_IFNAME=lo UCX_TLS=tcp,self UCX_NET_DEVICES=lo \
        LD_LIBRARY_PATH="$libpath" timeout 900 "${cmd[@]}" --master "127.0.0.1:$port" "$bin/all_reduce_perf" \
        "${SWEEP[@]}" -d float >"$out.node$i" 2>&1 &
    else
      CHORUS_MODE=host NCCL_NET=$net NCCL_SOCKET_IFNAME=cnet0 UCX_TLS=tcp,self UCX_NET_DEVICES=cnet0 \
        LD_LIBRARY_PATH="$libpath" netns_run "$PREFIX" "$i" env "${extra[@]}" timeout 900 \
        "${cmd[@]}" --master "$(netns_addr "$PREFIX" 0):$port" "$bin/all_reduce_perf" "${SWEEP[@]}" -d float \
        >"$out.node$i" 2>&1 &
    fi
    pids+=($!)
  done
  # A "node" that fails (e.g. its random store port was taken) leaves the
  # other one waiting for it, as a late peer may: stop it too.
  local failed=0
  while [ "${#pids[@]}" -gt 0 ]; do
    local left=() p
    wait -n "${pids[@]}" || failed=1
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && left+=("$p"); done
    pids=("${left[@]}")
    if [ "$failed" = 1 ] && [ "${#pids[@]}" -gt 0 ]; then
      pkill -TERM -P "$(printf '%s,' "${pids[@]}" | sed 's/,$//')" 2>/dev/null
      kill "${pids[@]}" 2>/dev/null
    fi
  done
  [ "$failed" = 0 ] || echo "run_net_compare: chorus $link $2 $net failed, see $out.node*" >&2
  mv "$out.node0" "$out"
}

mpi_job() {  # link layout out
  local link=$1 nn=${2%x*} per=${2#*x} out=$3
  if [ "$link" = lo ]; then
    timeout 900 "${MPIRUN[@]}" --mca btl_tcp_if_include lo -np $((nn * per)) "$BIN/mpi_allreduce_bench" \
      "${SWEEP[@]}" >"$out" 2>&1
  else
    local agent="$OUTDIR/agent.sh" hosts="$OUTDIR/hosts_$2"
    printf '#!/usr/bin/env bash\nhost=$1; shift\nexec ip netns exec "%s-$host" bash -c "$*"\n' "$PREFIX" >"$agent"
    chmod +x "$agent"
    : >"$hosts"
    for ((i = 0; i < nn; i++)); do echo "n$i slots=$per" >>"$hosts"; done
    # Each namespace's hostfile entry has room for its ranks, so OpenMPI does
    # not see that all of them share this machine's cores, and its ranks spin.
    # Where they outnumber the cores, ask for what it picks by itself on an
    # oversubscribed host (the lo case above): yield while idle.
    local -a yield=()
    if [ $((nn * per)) -gt "$(nproc)" ] && [[ "${MPI_EXTRA:-}" != *mpi_yield_when_idle* ]]; then
      yield=(--mca mpi_yield_when_idle 1)
    fi
    # routed=direct and no tree spawn: mpirun reaches every daemon itself
    # (without them its launch across namespaces fails now and then with
    # "ORTE does not know how to route a message to the specified daemon").
    local try rc
    for try in 1 2 3; do
      netns_run "$PREFIX" 0 timeout 900 "${MPIRUN[@]}" "${yield[@]}" --hostfile "$hosts" --mca plm_rsh_agent "$agent" \
        --mca plm_rsh_no_tree_spawn 1 --mca routed direct --mca oob_tcp_if_include cnet0 --mca btl_tcp_if_include cnet0 --map-by node --bind-to none -np $((nn * per)) \
        "$BIN/mpi_allreduce_bench" "${SWEEP[@]}" >"$out" 2>&1 &
      mpi_started "$!" "$out"
      rc=$?
      [ "$rc" = 125 ] || break
      echo "run_net_compare: openmpi $link $2: no output within ${MPI_START_S}s (launch $try of 3)" >&2
    done
    [ "$rc" = 0 ]
  fi || echo "run_net_compare: openmpi $link $2 failed, see $out" >&2
}

# mpirun's launch across namespaces now and then hangs before any rank runs
# (one orted never reports back). Waits for the job and returns its status,
# or 125 (after stopping it) when it has written nothing in MPI_START_S.
mpi_started() {  # pid out
  local pid=$1 out=$2 waited=0
  while kill -0 "$pid" 2>/dev/null; do
    if [ ! -s "$out" ] && [ "$waited" -ge "$MPI_START_S" ]; then
      pkill -TERM -P "$pid" 2>/dev/null; kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
      pkill -f "orted.*$OUTDIR/agent.sh" 2>/dev/null
      return 125
    fi
    sleep 1; waited=$((waited + 1))
  done
  wait "$pid"
}

# One stream each way at once: two independent pairs in opposite directions.
# With pinA/pinB ("taskset -c N"), side A's client and server run on one CPU
# and side B's on another, so each pair's ends are on different CPUs.
iperf_pairs() {  # out kind pinA pinB; uses iperf_job's a, b, addrA, addrB, p1, p2
  local out=$1 kind=$2 pa pb
  read -r -a pa <<<"$3"; read -r -a pb <<<"$4"
  "${b[@]}" "${pb[@]}" iperf3 -s -1 -p "$p1" -B "$addrB" >/dev/null 2>&1 &
  "${a[@]}" "${pa[@]}" iperf3 -s -1 -p "$p2" -B "$addrA" >/dev/null 2>&1 &
  sleep 0.5
  "${a[@]}" "${pa[@]}" iperf3 -c "$addrB" -p "$p1" -t 4 -J >"$out.${kind}fwd.json" 2>/dev/null &
  "${b[@]}" "${pb[@]}" iperf3 -c "$addrA" -p "$p2" -t 4 -J >"$out.${kind}rev.json" 2>/dev/null
  wait
}

iperf_job() {  # link out [pairs-only]: one stream one way; the free pairs; the pairs across CPUs
  local link=$1 out=$2 a b addrA addrB
  if [ "$link" = lo ]; then a=(); b=(); addrA=127.0.0.1; addrB=127.0.0.1
  else a=(ip netns exec "$PREFIX-n0"); b=(ip netns exec "$PREFIX-n1")
       addrA=$(netns_addr "$PREFIX" 0); addrB=$(netns_addr "$PREFIX" 1); fi
  local p1 p2; p1=$(netns_port 10000); p2=$((p1 + 1))
  iperf_pairs "$out" "" "" ""
  [ -z "${3:-}" ] || return 0
  "${b[@]}" iperf3 -s -1 -p "$p1" -B "$addrB" >/dev/null 2>&1 &
  sleep 0.5
  "${a[@]}" iperf3 -c "$addrB" -p "$p1" -t 4 -J >"$out.uni.json" 2>/dev/null
  wait
  # Two ranks on two cores send to each other from different CPUs, so every
  # byte moves between the cores' caches; free pairs share a CPU instead.
  [ "$(nproc)" -ge 2 ] && iperf_pairs "$out" x "taskset -c 0" "taskset -c 1"
}

# OpenMPI as its users run it must get near the link's TCP rate; if it does
# not (wrong interface, wrong transport), stop instead of publishing ratios.
mpi_check() {  # link
  local link=$1 saved=("${SWEEP[@]}")
  echo "run_net_compare: $link: checking OpenMPI against iperf3 at 8 MiB" >&2
  iperf_job "$link" "$OUTDIR/check_iperf_$link" pairs-only
  SWEEP=(-b 8M -e 8M -f 2 -n 10 -w 3)
  mpi_job "$link" 2x1 "$OUTDIR/check_openmpi_$link.txt"
  SWEEP=("${saved[@]}")
  python3 - "$OUTDIR" "$link" "$MIN_MPI_RATIO" <<'PY' || die "$link: OpenMPI is not configured to use the link (see $OUTDIR/check_*_$link*); fix its interface/transport selection before comparing"
import json, sys
outdir, link, need = sys.argv[1], sys.argv[2], float(sys.argv[3])
def gbps(p):
    try: return json.load(open(p))["end"]["sum_received"]["bits_per_second"] / 8e9
    except Exception: return None
a, b = gbps(f"{outdir}/check_iperf_{link}.fwd.json"), gbps(f"{outdir}/check_iperf_{link}.rev.json")
bw = None
for line in open(f"{outdir}/check_openmpi_{link}.txt"):
    f = line.split()
    if len(f) >= 8 and f[0] == "8388608": bw = float(f[7])
if a is None or b is None or bw is None:
    print(f"run_net_compare: {link}: no iperf3 ({a}, {b}) or OpenMPI ({bw}) result", file=sys.stderr); sys.exit(1)
bi = min(a, b)
print(f"run_net_compare: {link}: OpenMPI busbw {bw:.2f} GB/s at 8 MiB, iperf3 bidirectional {bi:.2f} GB/s "
      f"({bw / bi:.2f}x, need {need}x)", file=sys.stderr)
sys.exit(0 if bw >= need * bi else 1)
PY
}

if [ -z "${SUMMARIZE:-}" ]; then
  [ -x "$BIN/all_reduce_perf" ] && [ -x "$BIN/chorusrun" ] || die "build $BIN first"
  command -v iperf3 >/dev/null || die "iperf3 missing (scripts/setup.sh installs it)"
  case " $LINKS " in *" veth "*)
    netns_supported >/dev/null || die "veth link needs root and network namespaces"
    trap 'netns_destroy "$PREFIX"' EXIT
    netns_create "$PREFIX" 2 "$SUBNET" "$RATE" ;;
  esac
  cut -d' ' -f1 /proc/loadavg >"$OUTDIR/load_at_start.txt"
  for link in $LINKS; do mpi_check "$link"; done
  for rep in $(seq 1 "$REPS"); do
    for link in $LINKS; do
      echo "run_net_compare: rep $rep, $link: iperf3" >&2
      iperf_job "$link" "$OUTDIR/iperf_${link}_r$rep"
      for layout in $LAYOUTS; do
        for net in $BACKENDS; do
          echo "run_net_compare: rep $rep, $link, $layout, chorus $net" >&2
          chorus_job "$link" "$layout" "$net" "$OUTDIR/chorus-${net}_${link}_${layout}_r$rep.txt"
          for variant in $VARIANTS; do
            echo "run_net_compare: rep $rep, $link, $layout, chorus $net (${variant%%:*}: ${variant#*:})" >&2
            chorus_job "$link" "$layout" "$net" "$OUTDIR/chorus-${net}-${variant%%:*}_${link}_${layout}_r$rep.txt" \
              "$BIN" "${variant#*:}"
          done
          if [ -n "$BEFORE_BIN" ]; then
            echo "run_net_compare: rep $rep, $link, $layout, chorus $net (before: $BEFORE_BIN)" >&2
            chorus_job "$link" "$layout" "$net" "$OUTDIR/chorus-${net}-before_${link}_${layout}_r$rep.txt" "$BEFORE_BIN"
          fi
        done
        echo "run_net_compare: rep $rep, $link, $layout, openmpi tcp" >&2
        mpi_job "$link" "$layout" "$OUTDIR/openmpi_${link}_${layout}_r$rep.txt"
      done
    done
  done
  cut -d' ' -f1 /proc/loadavg >"$OUTDIR/load_at_end.txt"
fi

echo "run_net_compare: raw logs in $OUTDIR (load average $(cat "$OUTDIR/load_at_start.txt" 2>/dev/null) at start, \
$(cat "$OUTDIR/load_at_end.txt" 2>/dev/null) at end)" >&2
before=
[ -n "$BEFORE_BIN" ] || ls "$OUTDIR"/chorus-*-before_* >/dev/null 2>&1 && before=1
python3 - "$OUTDIR" "$LINKS" "$LAYOUTS" "$BACKENDS" "$RATE" "$before" "$VARIANTS" <<'PY'
import glob, json, os, statistics, sys
outdir, links, layouts, backends, rate = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4].split(), sys.argv[5]
labels = [v.split(":", 1)[0] for v in sys.argv[7].split()]
if sys.argv[6]:
    labels.append("before")
backends = [x for b in backends for x in [b] + [f"{b}-{l}" for l in labels]]

def rows(path, col=7):  # busbw (col 7) or out-of-place time in us (col 5)
    out = {}
    try:
        for line in open(path):
            f = line.split()
            if line.startswith("#") or len(f) < 13:
                continue
            try:
                out[int(f[0])] = float(f[col])
            except ValueError:
                pass
    except OSError:
        pass
    return out

def iperf(path):
    try:
        return json.load(open(path))["end"]["sum_received"]["bits_per_second"] / 8e9
    except Exception:
        return None

def both_ways(prefix, kind=""):  # the slower direction while both run ("x": pairs across CPUs)
    a, b = iperf(prefix + f".{kind}fwd.json"), iperf(prefix + f".{kind}rev.json")
    return None if a is None or b is None else min(a, b)

def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None

def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:g} {unit}"
        n /= 1024

fmt = lambda v: "-" if v is None else f"{v:.3f}" if v < 1 else f"{v:.2f}"
for link in links:
    uni = med(iperf(p) for p in glob.glob(f"{outdir}/iperf_{link}_r*.uni.json"))
    bi = med(both_ways(p[:-len(".uni.json")]) for p in glob.glob(f"{outdir}/iperf_{link}_r*.uni.json"))
    bix = med(both_ways(p[:-len(".uni.json")], "x") for p in glob.glob(f"{outdir}/iperf_{link}_r*.uni.json"))
    label = {"lo": "loopback (127.0.0.1)", "veth": "veth pair between two namespaces" + (f", tbf {rate}" if rate else "")}[link]
    print(f"#### {label}\n\niperf3 TCP, one stream: one direction **{fmt(uni)} GB/s**; both directions at once "
          f"**{fmt(bi)} GB/s** each way from two independent pairs, **{fmt(bix)} GB/s** from the same pairs with "
          f"each pair's ends on different CPUs (an all-reduce sends and receives at the same time).\n")
    for layout in layouts:
        libs = [f"chorus-{b}" for b in backends] + ["openmpi"]
        names = {f"chorus-{b}": f"Chorus {b.replace('-', ' ')}" for b in backends} | {"openmpi": "OpenMPI tcp"}
        ours = [l for l in libs if l != "openmpi"]
        def medians(col):
            data = {}
            for lib in libs:
                per = {}
                for p in glob.glob(f"{outdir}/{lib}_{link}_{layout}_r*.txt"):
                    for s, b in rows(p, col).items():
                        per.setdefault(s, []).append(b)
                data[lib] = {s: statistics.median(v) for s, v in per.items()}
            return data
        def table(title, data, sizes, vs_iperf, fmtv):
            print(f"{title}, {layout.replace('x', ' nodes x ')} rank(s) per node\n")
            head = ["size"] + [names[l] for l in libs] + \
                   ([f"{names[l]} / iperf3 {k}" for k in ("pairs", "cross-CPU pairs") for l in ours] if vs_iperf else []) + \
                   [f"{names[l]} / OpenMPI" for l in ours]
            print("| " + " | ".join(head) + " |")
            print("|" + "|".join(["---:"] * len(head)) + "|")
            for s in sizes:
                cells = [human(s)] + [fmtv(data[l].get(s)) for l in libs]
                if vs_iperf:
                    cells += ["-" if data[l].get(s) is None or not ref else f"{data[l][s] / ref:.2f}"
                              for ref in (bi, bix) for l in ours]
                for l in ours:
                    v, m = data[l].get(s), data["openmpi"].get(s)
                    cells.append("-" if v is None or not m else f"{v / m:.2f}")
                print("| " + " | ".join(cells) + " |")
            print()
        times, bws = medians(5), medians(7)
        small = sorted(s for s in set().union(*[d.keys() for d in times.values()]) if s <= 65536)
        large = sorted(s for s in set().union(*[d.keys() for d in bws.values()]) if s > 65536)
        table("all_reduce time (us, out of place; ratio < 1 is faster)", times, small, False,
              lambda v: "-" if v is None else f"{v:.1f}")
        table("all_reduce busbw (GB/s)", bws, large, True, fmt)
PY
