// When may two GPU ranks of one host share a FIFO in device memory? The
// decision is a pure function of the knobs (NCCL_P2P_DISABLE, NCCL_P2P_LEVEL)
// and of facts about the two GPUs (same device, peer access, path class), so
// it is unit-tested in every build; p2p_transport.cc gathers the facts with
// the CUDA runtime and sysfs. Nothing here uses CUDA.
#pragma once

#include <cstdint>
#include <string>

#include "topo/topology.h"
#include "transport/transport.h"

namespace chorus::p2p {

// NCCL_P2P_LEVEL, parsed. Unset: no path limit (peer access alone decides).
struct P2pLevel {
  bool set = false;
  topo::PathType max = topo::PathType::SYS;  // farthest path class P2P may use
};

// Accepts the path class names LOC, NVL, NVB, C2C, PIX, PXB, PXN, PHB, SYS
// (case-insensitive) and NCCL's legacy numbers 0..5 (0 LOC, 1 PIX, 2 PXB,
// 3 PHB, 4 and 5 SYS; larger numbers also mean SYS, as in NCCL). Empty text:
// not set. False, with `why`, for anything else (e.g. "NET", "-1", "fast").
bool parseP2pLevel(const std::string& text, P2pLevel* out, std::string* why);

// The knobs, as read when connections are made.
struct P2pSettings {
  bool disabled = false;  // NCCL_P2P_DISABLE != 0
  P2pLevel level;
  std::string warning;  // non-empty when NCCL_P2P_LEVEL was not understood (then ignored)
};
P2pSettings makeP2pSettings(int64_t disableValue, const std::string& levelText);
// makeP2pSettings over the environment; a bad NCCL_P2P_LEVEL is logged once
// per distinct value.
P2pSettings currentP2pSettings();

// What the caller knows about the two GPUs. `path` matters only between
// different devices and only when NCCL_P2P_LEVEL is set.
struct P2pPairFacts {
  bool sameDevice = false;
  bool canAccessPeer = false;  // both directions
  topo::PathType path = topo::PathType::SYS;
};

// The pure decision. Same device: always, unless P2P is disabled. Two
// devices: peer access is required, and with NCCL_P2P_LEVEL set the path
// must be at most that level. `why` (may be null) says why not.
bool p2pAllowed(const P2pSettings& settings, const P2pPairFacts& facts, std::string* why);

// The preconditions that need no GPU: both ranks in GPU mode, on one host,
// with a device each.
bool p2pCandidates(const PeerInfo& self, const PeerInfo& peer);

// Path class between two PCI devices from their sysfs device paths
// ("/sys/devices/pci0000:00/0000:00:01.0/.../0000:17:00.0", as realpath of
// /sys/bus/pci/devices/<bus id> gives) and NUMA nodes (-1: unknown). The
// deepest common ancestor decides: a bridge two levels above both (one PCI
// switch) is PIX, another bridge PXB, the same host bridge PHB; different
// host bridges are PHB on one NUMA node and SYS otherwise. Empty paths
// (unknown) give PHB when the NUMA nodes agree and SYS otherwise.
topo::PathType pciPathClass(const std::string& sysPathA, const std::string& sysPathB, int numaA, int numaB);

// Same as pciPathClass for two PCI bus ids, reading `sysfsRoot`/bus/pci/devices.
topo::PathType pciPathFromSysfs(const std::string& busIdA, const std::string& busIdB,
                                const std::string& sysfsRoot = "/sys");

// True when an MPS control daemon seems to run: its control pipe exists in
// ${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}.
bool mpsControlPipePresent();

}  // namespace chorus::p2p
