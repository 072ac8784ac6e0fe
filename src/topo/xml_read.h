// Loading a Topology from NCCL's topology XML format (NCCL_TOPO_FILE).
//
//   <system version="1">
//     <cpu numaid affinity arch vendor familyid modelid>
//       <pci busid class link_speed link_width ...>       nested <pci> = PCI switches
//         <gpu dev sm rank gdr>  <nvlink target count tclass/>  <c2c count bw/>  </gpu>
//         <nic>  <net name dev speed(Mb/s) port guid gdr latency maxconn/>  </nic>
//
// Unknown elements and attributes are ignored (files written by other tools
// carry more than we use); malformed syntax, an unknown version or a bad
// value of an attribute we use fail with ncclInvalidUsage and file:line.
// The loaded Topology has its paths computed.
#pragma once

#include <string>

#include "nccl.h"
#include "topo/topology.h"

namespace chorus::topo {

// PCI tclass values used in <nvlink tclass=...>.
inline constexpr unsigned kPciClassNvSwitch = 0x068000;  // "other bridge": an NVSwitch
inline constexpr unsigned kPciClassHostBridge = 0x060000;
inline constexpr unsigned kPciClassGpu = 0x030200;

ncclResult_t loadTopologyXml(const std::string& path, Topology* out);
// `source` names the text in error messages (a file name, "<string>").
ncclResult_t parseTopologyXml(const std::string& text, const std::string& source, Topology* out);

// PCIe link bandwidth (GB/s, one direction, usable) from sysfs/XML strings
// such as "16.0 GT/s PCIe" and a lane count; `fallback` if unparsable.
double pciLinkBwGBs(const std::string& speed, int width, double fallback);

}  // namespace chorus::topo
