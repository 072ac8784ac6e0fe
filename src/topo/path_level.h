// The path-level knobs: NCCL_P2P_LEVEL (how far apart two GPUs may be for a
// direct P2P FIFO) and NCCL_NET_GDR_LEVEL (how far a NIC may be from a GPU
// for GPUDirect RDMA). Both name a topo::PathType, the one path-class
// vocabulary of the library, or give a number in NCCL's legacy numbering.
#pragma once

#include <span>
#include <string>

#include "topo/topology.h"

namespace chorus::topo {

// NCCL's legacy numbering of the path-level knobs, kept for compatibility:
// 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 and above SYS.
PathType legacyPathLevel(unsigned long number);

// What a knob accepts: the path classes it can be set to by name
// (case-insensitive), and how many decimal digits a legacy number may have.
struct PathLevelSyntax {
  std::span<const PathType> names;
  size_t maxDigits;
};

// NCCL_P2P_LEVEL: LOC, NVL, NVB, C2C, PIX, PXB, PXN, PHB, SYS, numbers of up to 9 digits.
extern const PathLevelSyntax kP2pLevelSyntax;
// NCCL_NET_GDR_LEVEL: LOC, PIX, PXB, PHB, SYS, one digit.
extern const PathLevelSyntax kGdrLevelSyntax;

// Parses non-empty `text` in `syntax`; false (and *out untouched) for
// anything else.
bool parsePathLevel(const std::string& text, const PathLevelSyntax& syntax, PathType* out);

// The names `syntax` accepts, comma-separated ("LOC, PIX, ...") for messages.
std::string pathLevelNames(const PathLevelSyntax& syntax);

}  // namespace chorus::topo
