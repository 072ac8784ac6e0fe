// Every transport's sender checks that the receiver's FIFO has the slots it
// would write (transport/conn_request.cc): the slot size comes from each
// rank's own NCCL_BUFFSIZE / CHORUS_SLOT_BYTES / CHORUS_SLOTS, so two
// processes of one host started with different settings used to connect
// over shared memory and write pieces past the receiver's smaller slots.
//   * SlotGeometry/{0: shm, 1: inproc}.ConnectsWhereBothAgree: same geometry
//     connects and the sender sees the receiver's slots.
//   * SlotGeometry/{0, 1}.RefusesAnotherSlotSizeOrCount: a sender with a
//     larger slot, or more slots, fails with ncclInvalidUsage, and the last
//     error names both geometries and the settings to align.
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/result.h"
#include "transport/transport.h"
#include "transports/inproc/inproc_transport.h"
#include "transports/shm/shm_transport.h"

namespace chorus::test {
namespace {

constexpr uint32_t kReceiverSlotBytes = 4096;
constexpr uint32_t kReceiverSlots = 4;

ConnRequest requestFor(int self, int peer, uint32_t slotBytes, uint32_t nslots) {
  ConnRequest req;
  req.selfRank = self;
  req.peerRank = peer;
  req.slotBytes = slotBytes;
  req.nslots = nslots;
  req.label = "test " + std::to_string(peer) + "->" + std::to_string(self);
  return req;
}

PeerInfo thisProcessAs(int rank) {
  PeerInfo peer;
  peer.rank = rank;
  peer.pid = getpid();
  return peer;
}

// Creates rank 0's receive end with the receiver's geometry and connects
// rank 1's send end with `slotBytes` x `nslots`; returns connectSend's result.
ncclResult_t connectWith(Transport& transport, uint32_t slotBytes, uint32_t nslots, FifoEnd* sendEnd) {
  FifoEnd recvEnd;
  std::vector<uint8_t> handle;
  const ncclResult_t created =
      transport.createRecv(requestFor(0, 1, kReceiverSlotBytes, kReceiverSlots), thisProcessAs(1), &recvEnd, &handle);
  if (created != ncclSuccess) {
    ADD_FAILURE() << transport.name() << ": createRecv: " << lastErrorMessage();
    return created;
  }
  return transport.connectSend(requestFor(1, 0, slotBytes, nslots), thisProcessAs(0), handle, sendEnd);
}

void expectAgreementConnects(Transport& transport) {
  FifoEnd sendEnd;
  ASSERT_EQ(connectWith(transport, kReceiverSlotBytes, kReceiverSlots, &sendEnd), ncclSuccess) << lastErrorMessage();
  EXPECT_EQ(sendEnd.slotBytes, kReceiverSlotBytes);
  EXPECT_EQ(sendEnd.nslots, kReceiverSlots);
}

void expectMismatchRefused(Transport& transport, uint32_t slotBytes, uint32_t nslots) {
  FifoEnd sendEnd;
  EXPECT_EQ(connectWith(transport, slotBytes, nslots, &sendEnd), ncclInvalidUsage)
      << transport.name() << " connected a sender of " << nslots << " x " << slotBytes << " B";
  const std::string why = lastErrorMessage();
  EXPECT_NE(why.find(std::to_string(kReceiverSlots) + " x " + std::to_string(kReceiverSlotBytes) + " B"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find(std::to_string(nslots) + " x " + std::to_string(slotBytes) + " B"), std::string::npos) << why;
  EXPECT_NE(why.find("NCCL_BUFFSIZE"), std::string::npos) << why;
}

template <class TransportType>
class SlotGeometry : public ::testing::Test {};
using SlotCheckedTransports = ::testing::Types<ShmTransport, InprocTransport>;
TYPED_TEST_SUITE(SlotGeometry, SlotCheckedTransports);

TYPED_TEST(SlotGeometry, ConnectsWhereBothAgree) {
  TypeParam transport;
  expectAgreementConnects(transport);
}

TYPED_TEST(SlotGeometry, RefusesAnotherSlotSizeOrCount) {
  TypeParam transport;
  expectMismatchRefused(transport, 4 * kReceiverSlotBytes, kReceiverSlots);
  expectMismatchRefused(transport, kReceiverSlotBytes, 2 * kReceiverSlots);
}

}  // namespace
}  // namespace chorus::test
