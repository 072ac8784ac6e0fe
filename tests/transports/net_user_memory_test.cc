// Sends from and receives into user memory: a socket link without helper
// threads takes a slot that points at the application's buffer and sends
// the slot header and that memory as one message, which the receiver gets as
// an ordinary slot (FifoEnd::sendsUserMemory); a receive end lands a piece
// where its executor offered (FifoEnd::landings); only such links offer
// either; and a failed operation stops a link that still holds pieces of
// user memory, so nothing touches the buffer after the call returned.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/rank_runner.h"
#include "core/result.h"
#include "net_test_util.h"
#include "transports/net/net_transport.h"

namespace chorus::test {
namespace {

using Clock = std::chrono::steady_clock;
using EnvList = std::vector<std::pair<std::string, std::string>>;

// A connected sender/receiver pair of `slotBytes` x `nslots` (the two ends
// pretend to be on different hosts).
struct LinkPair {
  NetTransport transport;
  FifoEnd recvEnd, sendEnd;
  bool connect(uint32_t slotBytes, uint32_t nslots) {
    ConnRequest r;
    r.slotBytes = slotBytes;
    r.nslots = nslots;
    r.label = "user-memory 0->1";
    ConnRequest recvReq = r, sendReq = r;
    recvReq.selfRank = sendReq.peerRank = 1;
    recvReq.peerRank = sendReq.selfRank = 0;
    std::vector<uint8_t> handle;
    return transport.createRecv(recvReq, peerOn(0, 0x1111, 1), &recvEnd, &handle) == ncclSuccess &&
           transport.connectSend(sendReq, peerOn(1, 0x2222, 2), handle, &sendEnd) == ncclSuccess;
  }
};

void postPiece(SendConnector& send, const char* piece, uint64_t bytes) {
  const UserMemorySlot where{reinterpret_cast<uintptr_t>(piece), bytes};
  std::memcpy(send.slot(), &where, sizeof(where));
  send.post(kUserMemorySlotMarker);
}

TEST(NetUserMemory, OnlySocketLinksWithoutHelperThreadsSendFromUserMemory) {
  ScopedEnv env(EnvList{{"NCCL_SOCKET_IFNAME", "lo"}, {"NCCL_NET", "socket"}});
  {
    LinkPair plain;
    ASSERT_TRUE(plain.connect(4096, 4)) << lastErrorMessage();
    EXPECT_EQ(plain.sendEnd.sendsUserMemory, plain.sendEnd.mover != nullptr)
        << "a socket link moved by the executor sends from user memory";
    EXPECT_FALSE(plain.recvEnd.sendsUserMemory);
    SendConnector send(std::move(plain.sendEnd));
    RecvConnector recv(std::move(plain.recvEnd));
    ASSERT_TRUE(send.ready());
    send.post(8);  // connect fully before the ends go (see net_transport_test.cc)
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!recv.ready() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::microseconds(100));
    ASSERT_TRUE(recv.ready());
    recv.release();
  }
  for (const EnvList& off : {EnvList{{"NCCL_SOCKET_NTHREADS", "1"}, {"NCCL_NSOCKS_PERTHREAD", "1"}},
                             EnvList{{"CHORUS_NET_USER_MEMORY", "0"}}, EnvList{{"CHORUS_NET_INLINE", "0"}}}) {
    ScopedEnv knob(off);
    LinkPair pair;
    ASSERT_TRUE(pair.connect(4096, 4)) << lastErrorMessage();
    EXPECT_FALSE(pair.sendEnd.sendsUserMemory) << off[0].first << "=" << off[0].second;
    SendConnector send(std::move(pair.sendEnd));
    RecvConnector recv(std::move(pair.recvEnd));
    ASSERT_TRUE(send.ready());
    send.post(8);
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!recv.ready() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::microseconds(100));
    ASSERT_TRUE(recv.ready());
    recv.release();
  }
}

class NetUserMemoryPair : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pair_.connect(kSlotBytes, kSlots)) << lastErrorMessage();
    if (!pair_.sendEnd.sendsUserMemory) GTEST_SKIP() << "this link does not send from user memory (inline moves off)";
  }
  static constexpr uint32_t kSlotBytes = 4096, kSlots = 4;
  ScopedEnv env_{EnvList{{"NCCL_SOCKET_IFNAME", "lo"}, {"NCCL_NET", "socket"}}};
  LinkPair pair_;
};

TEST_F(NetUserMemoryPair, PiecesOfUserMemoryArriveAsOrdinarySlots) {
  SendConnector send(std::move(pair_.sendEnd));
  RecvConnector recv(std::move(pair_.recvEnd));
  constexpr int kPieces = 300;
  std::vector<char> buffer(kPieces * kSlotBytes);
  for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<char>(i * 7 + 3);
  auto pieceBytes = [](int k) { return static_cast<uint32_t>((k * 37) % (kSlotBytes + 1)); };
  int sent = 0, received = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (received < kPieces && Clock::now() < deadline) {
    if (sent < kPieces && send.ready()) {
      postPiece(send, buffer.data() + sent * kSlotBytes, pieceBytes(sent));
      ++sent;
    }
    if (recv.ready()) {
      ASSERT_EQ(recv.size(), pieceBytes(received)) << "piece " << received;
      ASSERT_EQ(std::memcmp(recv.slot(), buffer.data() + received * kSlotBytes, recv.size()), 0)
          << "piece " << received;
      recv.release();
      ++received;
    }
  }
  EXPECT_EQ(received, kPieces);
  while (!send.sent() && Clock::now() < deadline) std::this_thread::yield();
  EXPECT_TRUE(send.sent()) << "the receiver took every piece, but the sends never completed";
  EXPECT_FALSE(send.end().health->failed()) << send.end().health->message;
  EXPECT_FALSE(recv.end().health->failed()) << recv.end().health->message;
}

// The receiver offers output addresses (RecvConnector::offerLanding): a
// piece of exactly the offered size lands there and its slot says so; a
// piece of another size, or one not offered, stays in the slot.
TEST_F(NetUserMemoryPair, OfferedPiecesLandInUserMemoryTheRestInSlots) {
  SendConnector send(std::move(pair_.sendEnd));
  RecvConnector recv(std::move(pair_.recvEnd));
  ASSERT_NE(recv.end().landings, nullptr) << "a socket receive end offers landings";
  std::vector<char> out(kSlots * kSlotBytes, 0);
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  for (int round = 0; round < 50; ++round) {
    // Piece 0 is offered at its size, piece 1 at a wrong size, piece 2 not at all.
    const uint64_t base = recv.head();
    recv.offerLanding(base, out.data(), 1000);
    recv.offerLanding(base + 1, out.data() + kSlotBytes, 999);
    for (int i = 0; i < 3; ++i) {
      while (!send.ready() && Clock::now() < deadline) std::this_thread::yield();
      ASSERT_TRUE(send.ready());
      for (int b = 0; b < 1000; ++b) send.slot()[b] = static_cast<char>(round + i * 3 + b);
      send.post(1000);
    }
    for (int i = 0; i < 3; ++i) {
      while (!recv.ready() && Clock::now() < deadline) std::this_thread::yield();
      ASSERT_TRUE(recv.ready()) << "round " << round << " piece " << i;
      ASSERT_EQ(recv.size(), 1000u);
      ASSERT_EQ(recv.landed(), i == 0) << "round " << round << " piece " << i;
      const char* data = recv.landed() ? recv.landedAt() : recv.slot();
      if (i == 0) {
        ASSERT_EQ(data, out.data());
      }
      for (int b = 0; b < 1000; ++b)
        ASSERT_EQ(data[b], static_cast<char>(round + i * 3 + b)) << "round " << round << " piece " << i;
      recv.release();
    }
  }
  EXPECT_FALSE(recv.end().health->failed()) << recv.end().health->message;
}

// The receiver stops taking slots, so pieces larger than the socket buffers
// stay unsent; the failed operation's dropUserMemory must stop the link
// (and say why), and a link with everything sent is left alone.
TEST(NetUserMemory, AFailedOperationStopsALinkStillHoldingUserMemory) {
  ScopedEnv env(EnvList{{"NCCL_SOCKET_IFNAME", "lo"}, {"NCCL_NET", "socket"}});
  constexpr uint32_t kBig = 8u << 20, kSlots = 2;
  LinkPair pair;
  ASSERT_TRUE(pair.connect(kBig, kSlots)) << lastErrorMessage();
  if (!pair.sendEnd.sendsUserMemory) GTEST_SKIP() << "this link does not send from user memory (inline moves off)";
  SendConnector send(std::move(pair.sendEnd));
  RecvConnector recv(std::move(pair.recvEnd));
  std::vector<char> buffer(kBig, 'u');
  postPiece(send, buffer.data(), 16);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!send.sent() && Clock::now() < deadline) std::this_thread::yield();
  ASSERT_TRUE(send.sent());
  send.dropUserMemory();  // nothing unsent: nothing to stop
  EXPECT_FALSE(send.end().health->failed()) << send.end().health->message;
  // The receiver's two slots take one more piece; the next ones (16 MiB,
  // more than loopback's socket buffers hold) cannot all leave.
  for (int i = 0; i < 3; ++i) {
    while (!send.ready() && Clock::now() < deadline) std::this_thread::yield();
    ASSERT_TRUE(send.ready()) << "piece " << i;
    postPiece(send, buffer.data(), kBig);
  }
  ASSERT_FALSE(send.sent()) << "16 MiB left at once although the receiver takes nothing";
  send.dropUserMemory();
  ASSERT_TRUE(send.end().health->failed());
  EXPECT_NE(std::string(send.end().health->message).find("using the application's buffer"), std::string::npos)
      << send.end().health->message;
}

}  // namespace
}  // namespace chorus::test
