// The Topology value: what one machine is made of, as a graph of nodes
// (GPUs, CPUs = NUMA domains, PCI switches, NICs) joined by links with a type
// and a bandwidth, plus the best path between any two nodes once
// computePaths() has run.
//
// Who fills it: discovery (topo/discover.*: sysfs, hwloc, NVML loaded at run
// time), the XML reader (topo/xml_*: NCCL_TOPO_FILE, NCCL's format) and the
// synthetic generators used by tests and chorus-topo. Who reads it: the graph
// search (topo/search.*) and the tuner. A Topology describes ONE host; a
// communicator spanning hosts is a CommTopology (topo/comm_topology.h): one
// Topology per distinct host plus the rank -> (host, device) map.
//
// Bandwidths are in GB/s (1e9 bytes/s), one direction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace chorus::topo {

enum class NodeType : uint8_t { Gpu = 0, Cpu = 1, PciSwitch = 2, Nic = 3 };

// Physical link kinds. Smp is the CPU-to-CPU interconnect (QPI/UPI/xGMI).
enum class LinkType : uint8_t { NvLink = 0, C2C = 1, Pci = 2, Smp = 3, Net = 4 };

// Path classes between two nodes, best first; the names and order are NCCL's
// (and what NCCL_P2P_LEVEL / NCCL_NET_GDR_LEVEL accept).
//   LOC same node, NVL direct NVLink, NVB NVLink through one intermediate GPU,
//   C2C chip-to-chip, PIX one PCI switch, PXB several PCI switches (no CPU),
//   PXN through a peer GPU's NIC, PHB through the CPU's host bridge,
//   SYS across the CPU interconnect, NET over the network, DIS disconnected.
enum class PathType : uint8_t { LOC = 0, NVL, NVB, C2C, PIX, PXB, PXN, PHB, SYS, NET, DIS };

const char* nodeTypeName(NodeType t);
const char* linkTypeName(LinkType t);
const char* pathTypeName(PathType t);
// Parses "NVL", "PIX", ... (case-insensitive) or a number; false if unknown.
bool parsePathType(const std::string& s, PathType* out);

struct Node {
  NodeType type = NodeType::Cpu;
  int index = 0;      // position among nodes of the same type (GPU 0, 1, ...)
  std::string busId;  // PCI bus id "0000:17:00.0" (GPU, NIC, switch); empty for CPUs
  int numa = -1;      // NUMA node this sits under (the CPU's own id for CPUs)
  // GPU
  int cudaDev = -1;
  int smVersion = 0;  // e.g. 90
  int rank = -1;      // communicator rank bound to this GPU (or CPU in host mode), -1 if none
  bool gdr = false;   // GPU (or NIC) supports GPUDirect RDMA
  // CPU
  std::string arch;      // "x86_64", "aarch64"
  std::string vendor;    // "GenuineIntel", "AuthenticAMD"
  std::string affinity;  // cpuset mask as in sysfs ("ffff,00000000")
  int cores = 0;
  // NIC
  std::string name;  // "mlx5_0", "eth0"
  int port = 1;
  uint64_t guid = 0;
  double speedGBs = 0;  // NIC port speed
  bool rdma = false;    // an InfiniBand/RoCE device (else a plain socket NIC)
  // GPU: NVLinks that go into an NVSwitch fabric. There is no NVSwitch node:
  // every pair of GPUs on the fabric gets a direct NvLink link (viaNvSwitch)
  // whose bandwidth is the smaller GPU's aggregate, which is what a GPU can
  // push to any one peer through the switch. This count lets a dump write the
  // fabric back as it was read.
  int nvSwitchLinks = 0;
  // CPU: as reported by the CPU (cpuid family/model), kept for dumps.
  int familyId = 0;
  int modelId = 0;
};

struct Link {
  int from = -1;  // node indices into Topology::nodes
  int to = -1;
  LinkType type = LinkType::Pci;
  double bwGBs = 0;
  int count = 1;             // parallel links folded into this one (e.g. NVLink lanes)
  bool viaNvSwitch = false;  // NvLink between two GPUs through the NVSwitch fabric (see Node::nvSwitchLinks)
};

struct Path {
  PathType type = PathType::DIS;
  double bwGBs = 0;       // bottleneck bandwidth along the path
  std::vector<int> hops;  // node indices from source to destination, both included
};

struct Topology {
  std::string hostName;  // for messages and dumps
  std::vector<Node> nodes;
  std::vector<Link> links;  // directed; addLink adds both directions
  // paths[a][b], filled by computePaths().
  std::vector<std::vector<Path>> paths;

  int addNode(Node n);                                                     // returns its index; sets n.index
  void addLink(int a, int b, LinkType type, double bwGBs, int count = 1);  // both directions
  std::vector<int> nodesOfType(NodeType t) const;                          // node indices, in index order
  int findGpu(int cudaDev) const;                                          // node index or -1
  int findByBusId(const std::string& busId) const;                         // node index or -1
  int cpuOf(int node) const;                                               // the CPU (NUMA) node above `node`, or -1
  int findLink(int from, int to) const;                                    // index into links of from->to, or -1
  // Widest-bottleneck path between every pair, then classified (PathType).
  void computePaths();
  const Path& path(int a, int b) const { return paths[a][b]; }
};

// Canonical PCI bus id: "0000:17:00.0" (lower-case hex, 4-digit domain) from
// any of "17:00.0", "00000000:17:00.0", "0000:17:00.0"; "" if not a bus id.
std::string normalizeBusId(const std::string& busId);

// Well-known bandwidths (GB/s per direction) used when a source does not say.
namespace bw {
inline constexpr double kNvLinkPerLink(int smVersion) { return smVersion >= 90 ? 20.0 : smVersion >= 80 ? 20.0 : 18.0; }
inline constexpr double kPciGen3x16 = 12.0;
inline constexpr double kPciGen4x16 = 24.0;
inline constexpr double kPciGen5x16 = 48.0;
inline constexpr double kSmpIntel = 10.0;
inline constexpr double kSmpAmd = 16.0;
inline constexpr double kC2C = 180.0;
inline constexpr double kLocal = 5000.0;     // a path from a node to itself (LOC)
inline constexpr double kHostMemcpy = 10.0;  // one host-mode rank's copy bandwidth, used for shm paths
}  // namespace bw

}  // namespace chorus::topo
