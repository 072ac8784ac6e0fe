// The tuner's cost model: one formula per algorithm, priced with the numbers
// the graph search found (graph/comm_graph.h).
//
//   time = launch + (channels - 1) * per-channel cost
//        + latency   (sequential hops on the critical path x hop latency,
//                     intra-host and inter-host hops priced separately)
//        + bytes on the busiest link / bandwidth
//
// Bandwidth of c channels: inside a host min(c', found) x channel speed,
// capped by what one rank can copy (host mode); across hosts min(c, NICs) x
// NIC speed. Protocols: LL halves hop latency-ish and loses bandwidth (flags
// share the line on GPUs, small slots in host mode).
//
//   AllReduce ring   2(n-1) hops          2(n-1)/n * S / bw(ring)
//   AllReduce tree   2 x depth hops        2 S / (0.9 bw(ring))   (both trees,
//                    depth = log2 hosts inter hops + G-1 intra hops of the
//                    chain inside a host)
//   AllReduce hier   2(G-1) intra + 2(H-1) inter hops
//                    2(G-1)/G * S / bw(intra) + 2(H-1)/H * S / bw(NICs)
//                    Every rank of a host crosses to the other hosts in each
//                    inter hop, where the tree and ring send one message per
//                    host: the G messages share the host's NICs, and each
//                    takes a NIC (or in host mode the kernel's network
//                    stack) netMessageUs, so an inter hop of hier costs
//                    (ceil(G / NICs) - 1) x netMessageUs more.
//   AllReduce direct 1 hop (2 ranks)      S / bw(ring) + 0.25 S / bw(intra)
//                    (each rank reduces all of S, the ring S/2 per pass: the
//                    extra is the rank's own work, at its own bandwidth)
//                    recursive doubling (power-of-two n > 2, host mode):
//                    log2 n exchanges, log2 H of them inter-host (priced as
//                    hier's), each S / bw(ring) + 0.25 S / bw(intra)
//   Across hosts every channel beyond the first cuts each message that leaves
//   a host into one more: + (channels - 1) x netMessageUs for each message
//   the critical path sends through one NIC in turn (ring: the hops that
//   leave a host; tree: 2 x depth; hier and direct: their inter hops x
//   ceil(G / NICs)). In host mode that is the kernel's TCP work, which more
//   channels only repeat.
//   AllGather / ReduceScatter ring  (n-1) hops, (n-1)/n * S / bw(ring)
//   Broadcast / Reduce ring chain   (n-1) hops, S / bw(ring)
//   point-to-point direct           1 hop, (n-1)/n * S / bw(ring)
#pragma once

#include <cstddef>

#include "core/coll_types.h"
#include "graph/comm_graph.h"

namespace chorus {

struct MachineModel {
  int nranks = 1;
  int nhosts = 1;
  int ranksPerHost = 1;      // G; with uneven hosts the largest
  bool uniformHosts = true;  // hierarchical AllReduce possible
  bool hostMode = true;
  int foundChannels = 32;     // channels the links sustain (graph search)
  double channelBwGBs = 3.6;  // per channel, inside a host
  double rankBwGBs = 6.0;     // what one rank moves in total (host mode copy bandwidth)
  double nicBwGBs = 12.5;
  int nics = 1;
  double intraHopUs[kNumProtos] = {0.4, 0.3};
  double interHopUs[kNumProtos] = {5.4, 5.3};
  // What one more small message through a host's NIC costs before the next
  // can leave: in host mode the kernel's TCP path on the sending and the
  // receiving side (a few microseconds a message), on GPUs the NIC's
  // message rate.
  double netMessageUs = 2.0;
  double llBwFactor = 0.8;
  double launchUs = 0.3;
  double channelUs = 1.0;
  // LL keeps its flags inside the data and never publishes `tail`, so a
  // network proxy cannot forward it: GPU kernels talking to other hosts use
  // Simple only. (Host mode LL is moved by host threads and works anywhere.)
  bool llAcrossHosts = true;
  bool proxiedPeers = false;  // TuneInputs::proxiedPeers: some ranks behind a network proxy
};

// The model of a communicator: from its graph, or (graph == nullptr) one host
// of nranks host-mode ranks. `hostMode` is the communicator's mode; without
// it the graph's placement says (ranks on CPU nodes: host mode), which is
// what a tool that has a graph but no communicator can know.
MachineModel machineModel(const graph::CommGraph* graph, int nranks, bool hostMode);
MachineModel machineModel(const graph::CommGraph* graph, int nranks);

// Estimated microseconds, or a negative value when the algorithm cannot run the collective.
double estimateUs(Algo algo, Proto proto, CollType coll, size_t bytes, int nchannels, const MachineModel& m);

}  // namespace chorus
