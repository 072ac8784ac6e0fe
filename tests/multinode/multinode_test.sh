#!/usr/bin/env bash
# Multi-node tests that really cross a network: every "node" is a network
# namespace (tests/multinode/netns_lib.sh) with its own address and host
# identity; ranks on one node talk through shared memory, ranks on different
# nodes through the network transport over veth links.
#
#   multinode_test.sh BUILD_DIR SCENARIO
#     colls-socket | colls-ucx   2 nodes x 2 ranks, every collective checked (-c 1)
#     mpirun                     2 nodes x 2 ranks launched by OpenMPI's mpirun
#     kill-node                  3 nodes x 2 ranks; node 2 is killed mid-job and
#                                the survivors must fail with an error in bounded time
#     link-down                  the same, but node 2's link goes down instead (no
#                                connection is closed: CHORUS_TIMEOUT_MS must catch it)
#     dead-host                  2 nodes x 1 rank over sockets, default knobs (no
#                                CHORUS_TIMEOUT_MS); node 1's link goes down mid-job:
#                                node 0 must fail with ncclRemoteError naming rank 1
#                                within 10 s (TCP keepalive + TCP_USER_TIMEOUT,
#                                CHORUS_TCP_DEAD_PEER_MS)
#
# Exits 77 (ctest: skipped) when network namespaces are unavailable (not root).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/netns_lib.sh"
build=${1:?build dir}
scenario=${2:?scenario}
bin="$build/bin"

if ! why=$(netns_supported); then
  echo "SKIPPED: $why"
  exit 77
fi

prefix="chmn$$"
subnet=$((100 + $$ % 100))
log=$(mktemp -d "/tmp/chorus-multinode-$scenario.XXXXXX")
cleanup() { netns_destroy "$prefix"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
  echo "FAILED ($scenario): $*"
  for f in "$log"/*.log; do
    [ -f "$f" ] || continue
    echo "---- $f"
    tail -n 40 "$f"
  done
  exit 1
}

# run_job NNODES NPERNODE TIMEOUT_S program args... : one chorusrun per node; all must succeed.
run_job() {
  local nnodes=$1 nper=$2 tmo=$3
  shift 3
  local master
  master="$(netns_addr "$prefix" 0):$(netns_port)"
  local pids=() i rc=0
  for ((i = 0; i < nnodes; i++)); do
    netns_run "$prefix" "$i" timeout "$tmo" "$bin/chorusrun" -n "$nper" --nnodes "$nnodes" --node-rank "$i" \
      --master "$master" "$@" >"$log/node$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || rc=$?
  done
  return $rc
}

colls() {
  local net=$1
  export NCCL_NET=$net CHORUS_MODE=host CHORUS_TIMEOUT_MS=20000
  # UCX must cross the veth link, not find the peer through its own shared memory.
  [ "$net" = UCX ] && export UCX_TLS=tcp,self UCX_NET_DEVICES=cnet0
  netns_create "$prefix" 2 "$subnet"
  local c
  for c in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv gather scatter; do
    run_job 2 2 120 "$bin/${c}_perf" -b 8 -e 4M -f 32 -c 1 -n 2 -w 1 -d float ||
      fail "$c across 2 nodes x 2 ranks over $net"
    grep -q "Out of bounds values : 0 OK" "$log/node0.log" || fail "$c: no passing check summary"
    cp "$log/node0.log" "$log/$c.out"
    echo "ok: $c over $net (2 nodes x 2 ranks)"
  done
  # Other types and ops through the same path.
  run_job 2 2 120 "$bin/all_reduce_perf" -b 1K -e 1M -f 32 -c 1 -n 1 -w 1 -d all -o all ||
    fail "all_reduce, every type and op, over $net"
  echo "ok: all_reduce every type/op over $net"
  # Deterministic mode's chains through the nodes (src/plan/plan_wire_chain.cc):
  # -c 1 checks every element is the exact rank-order value.
  run_job 2 2 120 "$bin/all_reduce_perf" -b 1K -e 4M -f 64 -c 1 -n 1 -w 1 -d all -o all --deterministic 1 ||
    fail "deterministic all_reduce, every type and op, over $net"
  grep -q "Out of bounds values : 0 OK" "$log/node0.log" || fail "deterministic all_reduce: no passing check summary"
  echo "ok: deterministic all_reduce every type/op over $net"
  # ... and the reduce-scatter's (src/plan/plan_wire_chain_rs.cc).
  run_job 2 2 120 "$bin/reduce_scatter_perf" -b 1K -e 4M -f 64 -c 1 -n 1 -w 1 -d all -o all --deterministic 1 ||
    fail "deterministic reduce_scatter, every type and op, over $net"
  grep -q "Out of bounds values : 0 OK" "$log/node0.log" || fail "deterministic reduce_scatter: no passing check summary"
  echo "ok: deterministic reduce_scatter every type/op over $net"
}

mpirun_job() {
  export CHORUS_MODE=host NCCL_NET=Socket
  netns_create "$prefix" 2 "$subnet"
  local agent="$log/netns-agent.sh" hosts="$log/hostfile"
  # mpirun starts its daemons through this "remote shell": host name -> namespace.
  cat >"$agent" <<AGENT
#!/usr/bin/env bash
host=\$1; shift
exec ip netns exec "$prefix-\$host" env NCCL_HOSTID="$prefix-\$host" bash -c "\$*"
AGENT
  chmod +x "$agent"
  printf 'n0 slots=2\nn1 slots=2\n' >"$hosts"
  local attempt rc
  for attempt in 1 2; do
    # NCCL_DEBUG=INFO (INIT) makes every rank log "[chorus]" lines to stderr as
    # soon as it reaches the library: their absence tells a launcher failure
    # from a Chorus one.
    rc=0
    netns_run "$prefix" 0 timeout 120 mpirun --allow-run-as-root --oversubscribe -np 4 --hostfile "$hosts" \
      --mca plm_rsh_agent "$agent" --mca plm_rsh_no_tree_spawn 1 --mca routed direct \
      --mca oob_tcp_if_include cnet0 --mca btl tcp,self --mca btl_tcp_if_include cnet0 \
      -x CHORUS_MODE -x NCCL_NET -x NCCL_SOCKET_IFNAME=cnet0 -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT \
      "$bin/all_reduce_perf_mpi" -b 8 -e 4M -f 32 -c 1 -n 2 -w 1 >"$log/node0.log" 2>&1 || rc=$?
    [ "$rc" -ne 0 ] || break
    # OpenMPI's own start-up failing before any rank reached Chorus (its
    # daemons did not start over the rsh agent, or the job hung in MPI's
    # wire-up until the timeout) is not Chorus's doing: show why and try once
    # more; if it happens again, report the scenario skipped (visibly), since
    # this machine's OpenMPI cannot launch across namespaces. Any failure after
    # a rank reached Chorus counts.
    if ! grep -q '\[chorus\]\|Chorus' "$log/node0.log" &&
      { [ "$rc" -eq 124 ] || grep -q "ORTE was unable to reliably start" "$log/node0.log"; }; then
      echo "mpirun: OpenMPI did not get any rank to Chorus (attempt $attempt, exit $rc); its output:"
      head -n 60 "$log/node0.log"
      if ((attempt == 1)); then
        echo "mpirun: retrying once"
        continue
      fi
      echo "SKIPPED: OpenMPI's launcher failed twice before any rank reached Chorus; the Chorus side was not tested"
      exit 77
    fi
    echo "---- head of $log/node0.log"
    head -n 60 "$log/node0.log"
    fail "mpirun across 2 nodes x 2 ranks"
  done
  grep -q "Out of bounds values : 0 OK" "$log/node0.log" || fail "mpirun job: no passing check summary"
  echo "ok: mpirun 2 nodes x 2 ranks"
}

# How node 2 disappears: its processes are killed (the kernel closes their
# connections), or its link goes down (nothing is closed: only the timeout
# can tell).
kill_node() {
  local how=$1
  export CHORUS_MODE=host NCCL_NET=Socket CHORUS_TIMEOUT_MS=15000
  netns_create "$prefix" 3 "$subnet"
  local master
  master="$(netns_addr "$prefix" 0):$(netns_port)"
  local pids=() i
  for ((i = 0; i < 3; i++)); do
    netns_run "$prefix" "$i" timeout 120 stdbuf -oL "$bin/chorusrun" -n 2 --nnodes 3 --node-rank "$i" --master "$master" \
      "$bin/all_reduce_perf" -b 1M -e 1M -n 1000000 -w 1 >"$log/node$i.log" 2>&1 &
    pids+=($!)
  done
  # Wait until the job is running (rank 0 prints the column header), then kill node 2.
  local t0=$SECONDS
  until grep -q "size" "$log/node0.log" 2>/dev/null; do
    ((SECONDS - t0 < 60)) || fail "job did not start"
    sleep 0.2
  done
  sleep 2
  if [ "$how" = kill ]; then
    netns_kill_node "$prefix" 2
  else
    ip -n "$prefix-n2" link set cnet0 down
  fi
  local killedAt=$SECONDS
  for i in 0 1; do
    local rc=0
    wait "${pids[$i]}" || rc=$?
    [ "$rc" -ne 0 ] || fail "node $i exited 0 after node 2 was killed"
    [ "$rc" -ne 124 ] || fail "node $i hung until the outer timeout"
  done
  local took=$((SECONDS - killedAt))
  ((took <= 40)) || fail "survivors took ${took}s to fail (bound 40s)"
  grep -qiE "rank [0-9]+|peer|remote" "$log/node0.log" "$log/node1.log" || fail "no error naming the peer"
  echo "ok: survivors failed ${took}s after node 2 was cut off ($how):"
  grep -hiE "error|failed" "$log/node0.log" "$log/node1.log" | head -4
}

# A peer host that vanishes silently (its link goes down: no FIN, no RST)
# with no operation limit set: only TCP's own liveness (keepalive probes and
# TCP_USER_TIMEOUT on every stream) can tell, within CHORUS_TCP_DEAD_PEER_MS.
dead_host() {
  unset CHORUS_TIMEOUT_MS CHORUS_TCP_DEAD_PEER_MS
  export CHORUS_MODE=host NCCL_NET=Socket NCCL_SHM_DISABLE=1
  netns_create "$prefix" 2 "$subnet"
  local master pids=() i
  master="$(netns_addr "$prefix" 0):$(netns_port)"
  for ((i = 0; i < 2; i++)); do
    netns_run "$prefix" "$i" timeout 120 stdbuf -oL "$bin/chorusrun" -n 1 --nnodes 2 --node-rank "$i" \
      --master "$master" "$bin/all_reduce_perf" -b 4M -e 4M -n 1000000 -w 1 >"$log/node$i.log" 2>&1 &
    pids+=($!)
  done
  local t0=$SECONDS
  until grep -q "size" "$log/node0.log" 2>/dev/null; do
    ((SECONDS - t0 < 60)) || fail "job did not start"
    sleep 0.2
  done
  sleep 2
  ip -n "$prefix-n1" link set cnet0 down
  local cut rc=0
  cut=$(date +%s%N)
  wait "${pids[0]}" || rc=$?
  local ms=$((($(date +%s%N) - cut) / 1000000))
  netns_kill_node "$prefix" 1
  [ "$rc" -ne 0 ] || fail "node 0 exited 0 after node 1 was cut off"
  [ "$rc" -ne 124 ] || fail "node 0 hung until the outer timeout"
  ((ms <= 10000)) || fail "node 0 took ${ms} ms to fail (bound 10000 ms)"
  grep -q "remote process exited or there was a network error" "$log/node0.log" || fail "node 0: not ncclRemoteError"
  grep -q "rank 1" "$log/node0.log" || fail "node 0: the error does not name rank 1"
  echo "ok: node 0 failed ${ms} ms after node 1's link went down:"
  grep -hiE "error|failed" "$log/node0.log" | head -3
}

case "$scenario" in
  colls-socket) colls Socket ;;
  colls-ucx) colls UCX ;;
  mpirun) mpirun_job ;;
  kill-node) kill_node kill ;;
  link-down) kill_node link-down ;;
  dead-host) dead_host ;;
  *) echo "unknown scenario $scenario"; exit 2 ;;
esac
rm -rf "$log"
exit 0
