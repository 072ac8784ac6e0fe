#!/usr/bin/env bash
# Simulated nodes on one machine: each "node" is a network namespace with one
# interface (cnet0) plugged into a bridge that lives in its own "switch"
# namespace, so nothing is added to the machine's own network namespace and
# only addresses created here (10.<subnet>.0.0/24) are used.
#
#   source netns_lib.sh
#   netns_create PREFIX NNODES SUBNET [RATE]   # RATE e.g. 1gbit: tbf on both ends of every link
#                                              # NETNS_TCP_CC="cubic reno": the nodes' TCP congestion
#                                              # control, the first one the kernel takes (default: the host's)
#   netns_addr PREFIX I                        # 10.<subnet>.0.<I+1>
#   netns_run PREFIX I cmd...                  # run in node I with NCCL_HOSTID=<PREFIX>-nI
#   netns_kill_node PREFIX I                   # SIGKILL every process in node I
#   netns_destroy PREFIX                       # idempotent; call from an EXIT trap
#   netns_port [FIRST]                         # a random port in [FIRST (20000), ephemeral range)
#
# Requires root and iproute2 (ip, tc).

# A random TCP port below the kernel's ephemeral range (ip_local_port_range),
# so a listener does not collide with the local end of some connection
# (a store port taken that way made one "node" of a job fail and the other
# wait for it). Optional base offset: netns_port [first] (default 20000).
netns_port() {
  local first=${1:-20000} low
  low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  [ "$low" -gt $((first + 1000)) ] || low=$((first + 1000))
  echo $((first + RANDOM % (low - first)))
}

netns_supported() {
  [ "$(id -u)" -eq 0 ] || { echo "netns: not root"; return 1; }
  command -v ip >/dev/null || { echo "netns: ip (iproute2) missing"; return 1; }
  local probe="chorus-probe-$$"
  ip netns add "$probe" 2>/dev/null || { echo "netns: cannot create network namespaces here"; return 1; }
  ip netns del "$probe"
}

_netns_subnet_of() { cat "/tmp/$1.subnet"; }

netns_addr() { echo "10.$(_netns_subnet_of "$1").0.$(($2 + 1))"; }

netns_create() {
  local prefix=$1 nnodes=$2 subnet=$3 rate=${4:-}
  echo "$subnet" >"/tmp/$prefix.subnet"
  echo "$nnodes" >"/tmp/$prefix.nnodes"
  local sw="$prefix-sw"
  ip netns add "$sw"
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  ip -n "$sw" link set lo up
  local i
  for ((i = 0; i < nnodes; i++)); do
    local ns="$prefix-n$i"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # The veth pair is created inside the switch namespace, then one end moves to the node.
    ip -n "$sw" link add "p$i" type veth peer name cnet0 netns "$ns"
    ip -n "$sw" link set "p$i" master br0
    ip -n "$sw" link set "p$i" up
    ip -n "$ns" addr add "10.$subnet.0.$((i + 1))/24" dev cnet0
    ip -n "$ns" link set cnet0 up
    _netns_set_congestion_control "$ns" || return 1
    if [ -n "$rate" ]; then
      # Egress of the node (its sends) and egress of the switch port (its receives).
      ip netns exec "$ns" tc qdisc add dev cnet0 root tbf rate "$rate" burst 1mbit latency 100ms
      ip netns exec "$sw" tc qdisc add dev "p$i" root tbf rate "$rate" burst 1mbit latency 100ms
    fi
  done
  netns_wait_ready "$prefix" "$nnodes"
}

# A link between real hosts delivers each TCP flow in order: the NIC hashes
# a flow to one receive queue, and the sender keeps a flow on one transmit
# queue while it has packets in flight. A veth does neither: a packet joins
# the receive backlog of whichever CPU sent it. With bbr and no fq qdisc (this
# project's 2-core VM: bbr is the host's default and the kernel has no fq),
# TCP paces each socket with its own timers and sends parts of one flow from
# both CPUs (the timer, and acknowledgements processed in the peer's
# softirq), so the flow arrives out of order and is retransmitted (iperf3
# over a veth: 44,000-60,000 retransmitted segments in 3 s, none with reno).
# NETNS_TCP_CC="cubic reno" gives the nodes a loss-based control that does
# not pace (the first of the list the kernel accepts), and the veth then
# delivers in order; docs/performance.md ("Reordering on the simulated
# link") has the numbers. Unset, the nodes keep the host's control, as every
# measurement recorded before that section did.
_netns_set_congestion_control() {
  local ns=$1 cc
  [ -n "${NETNS_TCP_CC:-}" ] || return 0
  for cc in $NETNS_TCP_CC; do
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_congestion_control="$cc" 2>/dev/null && return 0
  done
  echo "netns: could not set the TCP congestion control of $ns to any of: $NETNS_TCP_CC" >&2
  return 1
}

# Links come up asynchronously: a launcher that lists interfaces before the
# node's cnet0 reports carrier (operstate UP) or before its bridge port is
# forwarding may find no usable network. Wait, boundedly, for both.
netns_wait_ready() {
  local prefix=$1 nnodes=$2 i deadline=$((SECONDS + 10))
  for ((i = 0; i < nnodes; i++)); do
    until ip -n "$prefix-n$i" -o link show cnet0 | grep -q "state UP" &&
      ip -n "$prefix-sw" -d -o link show "p$i" | grep -q "bridge_slave state forwarding"; do
      if ((SECONDS > deadline)); then
        echo "netns: node $i link not ready after 10 s:" >&2
        ip -n "$prefix-n$i" -o link show cnet0 >&2
        ip -n "$prefix-sw" -d -o link show "p$i" >&2
        return 1
      fi
      sleep 0.05
    done
  done
}

netns_run() {
  local prefix=$1 i=$2
  shift 2
  ip netns exec "$prefix-n$i" env NCCL_HOSTID="$prefix-n$i" NCCL_SOCKET_IFNAME=cnet0 "$@"
}

netns_kill_node() {
  local pids
  pids=$(ip netns pids "$1-n$2" 2>/dev/null || true)
  [ -n "$pids" ] && kill -9 $pids 2>/dev/null
  return 0
}

netns_destroy() {
  local prefix=$1 nnodes i
  nnodes=$(cat "/tmp/$prefix.nnodes" 2>/dev/null || echo 0)
  for ((i = 0; i < nnodes; i++)); do
    netns_kill_node "$prefix" "$i"
    ip netns del "$prefix-n$i" 2>/dev/null || true
  done
  ip netns del "$prefix-sw" 2>/dev/null || true
  rm -f "/tmp/$prefix.subnet" "/tmp/$prefix.nnodes"
}
