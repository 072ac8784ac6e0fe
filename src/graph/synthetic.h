// Synthetic machines: CommTopology values for machines this host is not,
// used by the graph and tuner tests and by `chorus-topo --synthetic`.
//
// Shapes (per host; G = GPUs or host-mode ranks per host):
//   nvswitch  G GPUs, every pair joined by NVLink through a switch fabric
//             (modelled as one NVLink link per pair carrying a GPU's whole
//             NVLink bandwidth, viaNvSwitch), two sockets, GPUs in pairs
//             under PCIe switches with the NICs spread over those switches
//             (default 8 NICs for 8 GPUs: two per switch).
//   pcie      G GPUs on PCIe gen4, two per PCIe switch, half under each of
//             two sockets joined by the CPU interconnect; one NIC per socket.
//   pairwise  G GPUs where GPUs 2k and 2k+1 share an NVLink bridge and
//             everything else goes over PCIe through one CPU; one NIC.
//   mesh      G GPUs, every pair joined directly by `nvlinks` NVLinks, PCIe
//             gen3 otherwise; one NIC.
//   host      no GPU: two NUMA nodes, ranks split across them (host mode); one NIC.
//
// Spec strings (chorus-topo --synthetic): "SHAPE:HOSTSxG[,nics=N][,nvlinks=N][,rr]"
// e.g. "nvswitch:4x8", "mesh:1x4,nvlinks=2", "host:2x4,rr" (rr places ranks
// round-robin across hosts instead of host by host).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topo/comm_topology.h"

namespace chorus::graph {

enum class SyntheticShape { NvSwitch, Pcie, Pairwise, Mesh, Host };

struct SyntheticSpec {
  SyntheticShape shape = SyntheticShape::NvSwitch;
  int hosts = 1;
  int perHost = 8;          // GPUs (or host-mode ranks) per host; one rank per GPU
  int nics = -1;            // NICs per host; -1: the shape's default
  int nvlinks = -1;         // NVLinks per connected GPU pair; -1: the shape's default
  bool roundRobin = false;  // rank r on host r % hosts (else host r / perHost)
  double netBwGBs = 12.5;
  double netLatencyUs = 5.0;
};

const char* syntheticShapeName(SyntheticShape s);
// Parses a spec string (see above). On failure returns false and says why in *error.
bool parseSyntheticSpec(const std::string& text, SyntheticSpec* out, std::string* error);

// One host of the given shape (paths are left for the consumer to compute).
topo::Topology syntheticHost(const SyntheticSpec& spec, int hostIndex);
// The whole communicator: spec.hosts hosts, spec.hosts * spec.perHost ranks.
topo::CommTopology syntheticCommTopology(const SyntheticSpec& spec);

// `hosts` copies of one machine (e.g. loaded from a topology file) with one
// rank per GPU (GPU index order), or when the machine has no GPU `perHost`
// ranks split over its CPUs; ranks host by host, or round-robin.
topo::CommTopology replicateHost(const topo::Topology& host, int hosts, int perHost, bool roundRobin);

// The least a communicator knows without topology discovery: which ranks
// share a host (equal hash). One CPU node per host holds all its ranks; hosts
// are numbered in order of their first rank.
topo::CommTopology hostsFromHashes(const std::vector<uint64_t>& hostHashOfRank);

}  // namespace chorus::graph
