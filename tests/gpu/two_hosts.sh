#!/usr/bin/env bash
# Runs one job as two "hosts" on this machine: two chorusrun groups of N
# processes each, with host ids of their own (NCCL_HOSTID), talking through
# the network transport over loopback, so the forms that only run across
# hosts (the two-level and chain wire forms, host staging of GPU slots) run
# on one GPU. The device check runs it under MPS (tests/gpu/device_check.sh).
#
#   tests/gpu/two_hosts.sh BIN_DIR N PROGRAM [ARGS...]
#
# Prints node 0's output, then node 1's; exits non-zero when either group
# failed.
set -uo pipefail
bin=${1:?usage: two_hosts.sh BIN_DIR N PROGRAM [ARGS...]}
per=${2:?usage: two_hosts.sh BIN_DIR N PROGRAM [ARGS...]}
shift 2
port=$((20000 + RANDOM % 20000))
out=$(mktemp -d /tmp/two_hosts.XXXXXX)
pids=()
for node in 0 1; do
  NCCL_HOSTID="two-hosts-node$node" NCCL_SOCKET_IFNAME=lo "$bin/chorusrun" -n "$per" --nnodes 2 --node-rank "$node" \
    --master "127.0.0.1:$port" "$@" >"$out/node$node" 2>&1 &
  pids+=($!)
done
stop_all() { kill "${pids[@]}" 2>/dev/null; }
trap 'stop_all; exit 143' TERM INT HUP
# A group that fails stops the other, which would otherwise wait for it.
rc=0
left=2
while [ "$left" -gt 0 ]; do
  wait -n "${pids[@]}"
  st=$?
  [ "$st" -eq 127 ] && break # none left
  left=$((left - 1))
  if [ "$st" -ne 0 ]; then
    rc=1
    stop_all
  fi
done
wait
for node in 0 1; do
  echo "==== node $node"
  cat "$out/node$node"
done
rm -rf "$out"
exit "$rc"
