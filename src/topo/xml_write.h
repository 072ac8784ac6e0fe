// Writing a Topology in NCCL's topology XML format (NCCL_TOPO_DUMP_FILE,
// chorus-topo --dump). Loading the result gives the same nodes, links and
// paths (see xml_read.h). Attributes beyond NCCL's (`rdma` on <net>, `cores`
// on <cpu> when it differs from the affinity mask, `host` on <system>) keep
// the round trip exact; NCCL ignores them.
#pragma once

#include <string>

#include "nccl.h"
#include "topo/topology.h"

namespace chorus::topo {

// PCIe "GT/s" string and lane count that give `bwGBs` back through pciLinkBwGBs.
void pciLinkFromBw(double bwGBs, std::string* speed, int* width);

std::string topologyToXml(const Topology& topo);
ncclResult_t dumpTopologyXml(const Topology& topo, const std::string& path);

}  // namespace chorus::topo
