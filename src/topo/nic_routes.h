// How far a rank's GPU is from each NIC of its host: what the network
// transport's GPUDirect choice (NCCL_NET_GDR_LEVEL, transports/net/
// net_gdr_policy.h) compares against. Built once per GPU-mode communicator
// from its topology; a network backend's device is matched to a NIC node by
// the PCI function of its sysfs path, else by its name ("mlx5_0:1" is port 1
// of mlx5_0). A device the topology does not list (a plugin's virtual
// device, a NIC discovery skipped) is taken to hang off the GPU's own CPU.
#pragma once

#include <string>
#include <vector>

#include "topo/comm_topology.h"

namespace chorus::topo {

struct NicRoute {
  std::string busId;  // "0000:3b:00.0"; empty when the NIC has no PCI function
  std::string name;   // "mlx5_0", "eth0"
  int port = 1;
  PathType type = PathType::DIS;  // from the rank's GPU
};

struct GpuNicRoutes {
  bool known = false;  // the topology places the rank's GPU and has its paths
  std::vector<NicRoute> nics;
  PathType unlisted = PathType::SYS;  // to a device hanging off the GPU's CPU
  // The GPU supports GPUDirect RDMA at all (cudaDevAttrGPUDirectRDMASupported,
  // filled in by the communicator's setup): without it no path is near enough.
  bool gpuDirectRdma = false;
};

// The routes from `rank`'s GPU; known = false in host mode or when the
// topology does not place the rank on a GPU.
GpuNicRoutes gpuNicRoutes(const CommTopology& t, int rank);

// The path class to the NIC behind a backend device (name and pciPath from
// its properties; either may be null). False when the routes are not known.
bool routeToNetDevice(const GpuNicRoutes& routes, const char* devName, const char* pciPath, PathType* type);

}  // namespace chorus::topo
