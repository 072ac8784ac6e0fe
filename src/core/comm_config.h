// Everything a communicator reads from ncclConfig_t and the environment,
// snapshotted once at init so behaviour does not change mid-job.
#pragma once

#include <cstdint>
#include <string>

#include "nccl.h"

namespace chorus {

inline constexpr uint32_t kBaseSlotBytes = 128 * 1024;
// NCCL_BUFFSIZE's default (4 MiB) over its 8 slots.
inline constexpr uint32_t kAcrossHostsSlotBytes = 512 * 1024;

struct CommConfig {
  int blocking = 1;
  int minChannels = 1;
  int maxChannels = 2;
  bool maxChannelsChosen = false;  // set by the user (env or config): GPU mode keeps it
  std::string commName;
  std::string netName;  // ncclConfig_t.netName: network backend by name for this communicator ("": NCCL_NET)
  int splitShare = 0;
  // Simple slots: point-to-point connectors use slotBytes; collective ones
  // (ring, tree, direct, wire) collSlotBytes, which init widens where every
  // host holds one rank (slotBytesForPlacement) unless the user chose a size.
  uint32_t slotBytes = kBaseSlotBytes;
  uint32_t collSlotBytes = kBaseSlotBytes;
  bool slotBytesAuto = true;  // CHORUS_SLOT_BYTES and NCCL_BUFFSIZE unset
  uint32_t llSlotBytes = 8 * 1024;
  uint32_t nslots = 8;
  int64_t timeoutMs = 0;        // CHORUS_TIMEOUT_MS, normalised (core/wait_limit.h): 0 = no limit
  int64_t initTimeoutMs = 0;    // CHORUS_INIT_TIMEOUT_MS, the same way
  int64_t stallWarnMs = 60000;  // CHORUS_STALL_WARN_S in ms: 0 = no stall reports
  int64_t spinCount = 500;      // polls before a wait yields (CHORUS_SPIN_COUNT, resolved at init)
  bool spinCountAuto = true;    // CHORUS_SPIN_COUNT unset (-1): init picks it (autoSpinCount)
  bool localRegister = true;    // registered buffers may be sent zero-copy (NCCL_LOCAL_REGISTER)
  std::string algo;             // NCCL_ALGO
  std::string proto;            // NCCL_PROTO
  // docs/wire.md: CHORUS_WIRE (a chorusWire_t; 0: native), CHORUS_WIRE_MIN_BYTES,
  // CHORUS_WIRE_FEEDBACK, CHORUS_DETERMINISTIC.
  uint8_t wire = 0;
  uint64_t wireMinBytes = 1u << 20;
  bool wireFeedback = false;
  bool wireHosts = true;  // CHORUS_WIRE_HOSTS: the two-level form of compressed reductions across hosts
  bool deterministic = false;
};

// CHORUS_STALL_WARN_S as milliseconds: 0 or negative turns reports off; at most a day.
int64_t stallWarnMsFromSeconds(int64_t seconds);

// CHORUS_SPIN_COUNT left to the library: 500 polls, or none when the ranks
// on this machine (every host that shares its kernel) outnumber its CPUs
// (`cpus` <= 0: unknown), where a rank that spins burns the time slice the
// peer it waits for needs.
constexpr int64_t kDefaultSpinCount = 500;
constexpr bool ranksOutnumberCpus(int machineRanks, long cpus) { return cpus > 0 && machineRanks > cpus; }
constexpr int64_t autoSpinCount(int machineRanks, long cpus) {
  return ranksOutnumberCpus(machineRanks, cpus) ? 0 : kDefaultSpinCount;
}

// The Simple slot of collective connectors when the user chose none: with
// every host holding one rank (and more than one rank), every connector is a
// network link, where each piece costs a message (system calls, a header, a
// wake-up of the peer): larger pieces there; elsewhere smaller ones keep the
// pipeline of shared-memory hops deep.
constexpr uint32_t slotBytesForPlacement(int nranks, int mostRanksOnAHost) {
  return nranks > 1 && mostRanksOnAHost == 1 ? kAcrossHostsSlotBytes : kBaseSlotBytes;
}

// Validates `user` (may be NULL) and fills `out` from it and the environment.
// `inherit` (may be NULL) supplies defaults for split/shrink children.
ncclResult_t resolveCommConfig(const ncclConfig_t* user, const CommConfig* inherit, CommConfig* out);

}  // namespace chorus
