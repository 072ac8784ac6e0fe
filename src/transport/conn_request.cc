// Checks shared by every transport's connectSend.
#include "core/result.h"
#include "transport/transport.h"

namespace chorus {

// Both ends of a connector size its FIFO from their own configuration; a
// sender that wrote pieces of its size into the receiver's smaller slots
// would write past them, so a mismatch refuses the connection.
ncclResult_t checkPeerSlots(const char* transport, const ConnRequest& req, uint32_t peerSlotBytes,
                            uint32_t peerNslots) {
  if (peerSlotBytes == req.slotBytes && peerNslots == req.nslots) return ncclSuccess;
  return fail(ncclInvalidUsage,
              "%s: %s: rank %d uses %u x %u B slots, this rank %u x %u B (NCCL_BUFFSIZE, CHORUS_SLOTS, "
              "CHORUS_SLOT_BYTES and CHORUS_LL_SLOT_BYTES must be set alike on every rank)",
              transport, req.label.c_str(), req.peerRank, peerNslots, peerSlotBytes, req.nslots, req.slotBytes);
}

}  // namespace chorus
