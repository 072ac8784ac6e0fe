// What a P2P receiver sends to its sender: a fixed-size, versioned record
// that says whose device memory holds the FIFO and how to reach it. A sender
// in the same process (equal processToken) takes the allocation through the
// process-wide registry (`registryId`, which also keeps it alive) and uses
// `pointer` directly; a sender in another process opens `ipc` (a
// cudaIpcMemHandle_t, kept as bytes so this header needs no CUDA).
//
// Encoding and validation are plain C++ so they are tested in every build.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "nccl.h"
#include "transport/transport.h"

namespace chorus::p2p {

inline constexpr uint32_t kP2pHandleMagic = 0x46503250;  // "P2PF" in memory order
inline constexpr uint16_t kP2pHandleVersion = 1;
inline constexpr size_t kP2pIpcBytes = 64;  // sizeof(cudaIpcMemHandle_t), checked in p2p_transport.cc

struct P2pHandle {
  uint32_t magic = kP2pHandleMagic;
  uint16_t version = kP2pHandleVersion;
  uint16_t bytes = sizeof(P2pHandle);  // of this record, as the receiver built it
  int32_t ownerPid = 0;
  int32_t device = -1;  // CUDA device of the FIFO, in the owner's numbering
  uint64_t processToken = 0;
  uint64_t registryId = 0;  // same-process senders: key in the p2p registry
  uint64_t pointer = 0;     // device address of the FIFO in the owner's process
  uint64_t totalBytes = 0;  // fifoTotalBytes(slotBytes, nslots)
  uint32_t slotBytes = 0;
  uint32_t nslots = 0;
  char busId[16] = {};  // PCI bus id of the owner's GPU ("0000:17:00.0"), NUL-terminated
  uint8_t hasIpc = 0;   // `ipc` is valid (only made when the peer is another process)
  uint8_t reserved[7] = {};
  uint8_t ipc[kP2pIpcBytes] = {};
};
static_assert(std::is_trivially_copyable_v<P2pHandle>);
static_assert(sizeof(P2pHandle) == 144, "the P2P handle layout is part of the wire format; bump the version");

void encodeP2pHandle(const P2pHandle& h, std::vector<uint8_t>* out);

// Checks everything a sender can check before touching the memory: size,
// magic, version, FIFO geometry against `req` (ncclInvalidUsage when the
// ranks disagree on CHORUS_SLOTS / CHORUS_SLOT_BYTES), the total size and a
// terminated bus id (ncclInternalError). Messages name req.label.
ncclResult_t decodeP2pHandle(const std::vector<uint8_t>& bytes, const ConnRequest& req, P2pHandle* out);

}  // namespace chorus::p2p
