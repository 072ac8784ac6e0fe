#include "transports/p2p/p2p_handle.h"

#include <cstring>

#include "core/result.h"
#include "transport/fifo.h"

namespace chorus::p2p {

void encodeP2pHandle(const P2pHandle& h, std::vector<uint8_t>* out) {
  out->resize(sizeof(h));
  std::memcpy(out->data(), &h, sizeof(h));
}

ncclResult_t decodeP2pHandle(const std::vector<uint8_t>& bytes, const ConnRequest& req, P2pHandle* out) {
  // The leading fields are stable across versions, so a version mismatch is
  // reported as such even when the sizes differ.
  constexpr size_t kPrefix = sizeof(uint32_t) + 2 * sizeof(uint16_t);
  if (bytes.size() < kPrefix)
    return fail(ncclInternalError, "p2p: %s: handle from rank %d has %zu bytes, expected %zu", req.label.c_str(),
                req.peerRank, bytes.size(), sizeof(P2pHandle));
  uint32_t magic = 0;
  uint16_t version = 0;
  std::memcpy(&magic, bytes.data(), sizeof(magic));
  std::memcpy(&version, bytes.data() + sizeof(magic), sizeof(version));
  if (magic != kP2pHandleMagic)
    return fail(ncclInternalError,
                "p2p: %s: handle from rank %d is not a P2P handle (magic %08x); did both ranks pick "
                "the p2p transport?",
                req.label.c_str(), req.peerRank, magic);
  if (version != kP2pHandleVersion)
    return fail(ncclInvalidUsage,
                "p2p: %s: rank %d uses P2P handle version %u, this rank %u (run the same Chorus "
                "build on every rank)",
                req.label.c_str(), req.peerRank, version, kP2pHandleVersion);
  if (bytes.size() != sizeof(P2pHandle))
    return fail(ncclInternalError, "p2p: %s: handle from rank %d has %zu bytes, expected %zu", req.label.c_str(),
                req.peerRank, bytes.size(), sizeof(P2pHandle));
  P2pHandle h;
  std::memcpy(&h, bytes.data(), sizeof(h));
  if (h.bytes != sizeof(P2pHandle))
    return fail(ncclInternalError, "p2p: %s: handle from rank %d says it has %u bytes, expected %zu", req.label.c_str(),
                req.peerRank, h.bytes, sizeof(P2pHandle));
  CHORUS_CHECK(checkPeerSlots("p2p", req, h.slotBytes, h.nslots));
  if (h.nslots == 0 || h.nslots > kMaxFifoSlots || h.slotBytes == 0 ||
      h.totalBytes != fifoTotalBytes(h.slotBytes, h.nslots))
    return fail(ncclInternalError, "p2p: %s: handle from rank %d describes a malformed FIFO (%u x %u B, %llu bytes)",
                req.label.c_str(), req.peerRank, h.nslots, h.slotBytes, (unsigned long long)h.totalBytes);
  if (std::memchr(h.busId, '\0', sizeof(h.busId)) == nullptr || h.device < 0 || h.pointer == 0)
    return fail(ncclInternalError, "p2p: %s: handle from rank %d is corrupt (device %d)", req.label.c_str(),
                req.peerRank, h.device);
  *out = h;
  return ncclSuccess;
}

}  // namespace chorus::p2p
