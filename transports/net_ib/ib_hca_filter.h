// NCCL_IB_HCA: which RDMA devices and ports the verbs backend may use.
// A comma list of `device[:port]` entries; names match as prefixes unless the
// list starts with '=' (exact names); a leading '^' turns the list into
// exclusions ("^=mlx5_1" excludes exactly mlx5_1). An entry without a port
// matches every port of the device. Empty: everything.
#pragma once

#include <string>
#include <vector>

namespace chorus::ib {

struct IbHcaEntry {
  std::string device;
  int port = -1;  // -1: any port
};

struct IbHcaFilter {
  bool exclude = false;
  bool exact = false;
  std::vector<IbHcaEntry> entries;

  // Malformed entries (empty names, bad ports) are dropped and counted.
  static IbHcaFilter parse(const std::string& spec, int* malformed = nullptr);
  bool allows(const std::string& device, int port) const;
};

}  // namespace chorus::ib
