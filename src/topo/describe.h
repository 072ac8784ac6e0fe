// A human-readable description of a Topology (chorus-topo, INFO logs): the
// tree CPUs -> PCI switches -> GPUs/NICs with each node's link to its parent,
// NVLink/C2C links, then the GPU x GPU and GPU x NIC path-type matrices.
#pragma once

#include <string>

#include "topo/topology.h"

namespace chorus::topo {

// Requires computePaths() to have run for the matrices (they are omitted otherwise).
std::string describeTopology(const Topology& topo);
// "GPU 3", "NIC 0 (mlx5_0)", "CPU 1", "PCI 0000:15:00.0".
std::string describeNode(const Topology& topo, int node);

}  // namespace chorus::topo
