// Both directions between two processes on one TCP connection
// (transports/net_socket/socket_pairing.h), within one process: two
// connections in opposite directions, one of which moves onto the other's
// reverse direction, messages of every size both ways before and after the
// move, and an orderly close of the moved side.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "common/rank_runner.h"
#include "transports/net_socket/socket_backend.h"
#include "transports/net_socket/socket_comm.h"

namespace chorus::test {
namespace {

using Clock = std::chrono::steady_clock;
using EnvList = std::vector<std::pair<std::string, std::string>>;

struct Pair {
  void* listen = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  sock::SocketComm* sendComm() const { return static_cast<sock::SocketComm*>(send); }
  sock::SocketComm* recvComm() const { return static_cast<sock::SocketComm*>(recv); }
};

class SocketDuplex : public ::testing::Test {
 protected:
  void SetUp() override {
    net_ = netSocketBackend();
    ASSERT_EQ(net_->init(nullptr), ncclSuccess);
  }
  void TearDown() override {
    for (Pair* p : {&a_, &b_}) {
      if (p->send) net_->closeSend(p->send);
      if (p->recv) net_->closeRecv(p->recv);
      if (p->listen) net_->closeListen(p->listen);
    }
  }
  void open(Pair* p) {
    char handle[CHORUS_NET_HANDLE_BYTES] = {};
    ASSERT_EQ(net_->listen(0, handle, &p->listen), ncclSuccess);
    ASSERT_EQ(net_->connect(0, handle, &p->send), ncclSuccess);
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (p->recv == nullptr && Clock::now() < deadline) {
      ASSERT_EQ(net_->accept(p->listen, &p->recv), ncclSuccess);
      if (p->recv == nullptr) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_NE(p->recv, nullptr);
  }
  // One message of n bytes over p, both ends driven from this thread.
  void message(const Pair& p, size_t n, int tag) {
    std::vector<uint8_t> sbuf(n), rbuf(n + 1, 0xEE);
    for (size_t i = 0; i < n; ++i) sbuf[i] = static_cast<uint8_t>(i * 7 + tag);
    void *sreq = nullptr, *rreq = nullptr;
    ASSERT_EQ(net_->irecv(p.recv, rbuf.data(), rbuf.size(), tag, nullptr, &rreq), ncclSuccess);
    ASSERT_EQ(net_->isend(p.send, sbuf.data(), n, tag, nullptr, &sreq), ncclSuccess);
    int sdone = 0, rdone = 0;
    size_t got = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while ((!sdone || !rdone) && Clock::now() < deadline) {
      if (!sdone) {
        ASSERT_EQ(net_->test(sreq, &sdone, nullptr), ncclSuccess);
      }
      if (!rdone) {
        ASSERT_EQ(net_->test(rreq, &rdone, &got), ncclSuccess);
      }
    }
    ASSERT_TRUE(sdone && rdone) << n << "-byte message, tag " << tag;
    ASSERT_EQ(got, n);
    EXPECT_TRUE(n == 0 || std::memcmp(sbuf.data(), rbuf.data(), n) == 0) << n << "-byte message, tag " << tag;
  }

  ScopedEnv env_{EnvList{{"NCCL_SOCKET_IFNAME", "lo"}, {"NCCL_NSOCKS_PERTHREAD", "2"}, {"NCCL_SOCKET_NTHREADS", "2"}}};
  const chorusNet_v1_t* net_ = nullptr;
  Pair a_, b_;
};

TEST_F(SocketDuplex, OneDirectionMovesOntoTheOthersConnection) {
  open(&a_);
  ASSERT_NO_FATAL_FAILURE(message(a_, 100, 1));  // before the reverse connection exists: no move
  EXPECT_FALSE(a_.sendComm()->moved());
  open(&b_);
  int tag = 2;
  // Inline messages and ones split over the data streams (which never move), both ways.
  // (20000 and 65536: inline, but past kSharedPayloadMax, so their payloads
  // stay on the moved connection's own socket.)
  for (size_t n : {size_t(8), size_t(0), size_t(20000), size_t(70000), size_t(65536), size_t(3) << 20, size_t(16)}) {
    ASSERT_NO_FATAL_FAILURE(message(a_, n, tag++));
    ASSERT_NO_FATAL_FAILURE(message(b_, n, tag++));
  }
  // Exactly one of the two send sides moved (the smaller connection id),
  // and its receiver followed.
  EXPECT_NE(a_.sendComm()->moved(), b_.sendComm()->moved());
  EXPECT_EQ(a_.recvComm()->moved(), a_.sendComm()->moved());
  EXPECT_EQ(b_.recvComm()->moved(), b_.sendComm()->moved());
  // The moved side closes: its receiver hears the goodbye on the shared
  // socket, and the other direction of that socket still works.
  Pair& moved = a_.sendComm()->moved() ? a_ : b_;
  Pair& other = &moved == &a_ ? b_ : a_;
  net_->closeSend(moved.send);
  moved.send = nullptr;
  char r[8];
  void* rreq = nullptr;
  ASSERT_EQ(net_->irecv(moved.recv, r, sizeof(r), 99, nullptr, &rreq), ncclSuccess);
  int done = 0;
  ncclResult_t res = ncclSuccess;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (res == ncclSuccess && !done && Clock::now() < deadline) res = net_->test(rreq, &done, nullptr);
  EXPECT_EQ(res, ncclRemoteError) << "the receive behind the goodbye must fail, not hang";
  ASSERT_NO_FATAL_FAILURE(message(other, 4096, 100));
}

// Without data streams every message is inline: large payloads after the
// move take the own socket, interleaved with small ones on the shared one.
TEST_F(SocketDuplex, LargeInlinePayloadsKeepTheirOwnSocketAfterTheMove) {
  ScopedEnv noStreams{EnvList{{"NCCL_SOCKET_NTHREADS", "0"}}};
  open(&a_);
  open(&b_);
  int tag = 1;
  for (int round = 0; round < 3; ++round)
    for (size_t n : {size_t(8), size_t(1) << 20, size_t(16384), size_t(16385), size_t(100)}) {
      ASSERT_NO_FATAL_FAILURE(message(a_, n, tag++));
      ASSERT_NO_FATAL_FAILURE(message(b_, n, tag++));
    }
  EXPECT_NE(a_.sendComm()->moved(), b_.sendComm()->moved());
  // Several in flight at once on the moved direction: headers on the shared
  // socket, some payloads on the own one, still matched in posting order.
  const Pair& p = a_.sendComm()->moved() ? a_ : b_;
  const size_t sizes[] = {40000, 8, 1 << 20, 16, 20000, 3};
  std::vector<std::vector<uint8_t>> sbufs, rbufs;
  std::vector<void*> sreq(6), rreq(6);
  for (int i = 0; i < 6; ++i) {
    sbufs.emplace_back(sizes[i], static_cast<uint8_t>(i + 1));
    rbufs.emplace_back(sizes[i], 0);
    ASSERT_EQ(net_->irecv(p.recv, rbufs[i].data(), sizes[i], 500 + i, nullptr, &rreq[i]), ncclSuccess);
  }
  for (int i = 0; i < 6; ++i)
    ASSERT_EQ(net_->isend(p.send, sbufs[i].data(), sizes[i], 500 + i, nullptr, &sreq[i]), ncclSuccess);
  int left = 12;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (left > 0 && Clock::now() < deadline)
    for (std::vector<void*>* reqs : {&sreq, &rreq})
      for (void*& req : *reqs) {
        if (req == nullptr) continue;
        int done = 0;
        ASSERT_EQ(net_->test(req, &done, nullptr), ncclSuccess);
        if (done) req = nullptr, --left;
      }
  ASSERT_EQ(left, 0) << "messages in flight did not all arrive";
  for (int i = 0; i < 6; ++i) EXPECT_EQ(rbufs[i], sbufs[i]) << "message " << i;
}

// The move's first messages posted at once, a large one first: the
// receiver's read of the MOVED header may take the start of a payload that
// keeps to the own stream along with it.
TEST_F(SocketDuplex, PayloadsRightBehindTheMoveArrive) {
  ScopedEnv noStreams{EnvList{{"NCCL_SOCKET_NTHREADS", "0"}}};
  open(&a_);
  open(&b_);
  for (const Pair* p : {&a_, &b_}) {
    const size_t sizes[] = {1 << 20, 8, 300000, 16};
    std::vector<std::vector<uint8_t>> sbufs, rbufs;
    std::vector<void*> sreq(4), rreq(4);
    for (int i = 0; i < 4; ++i) {
      sbufs.emplace_back(sizes[i], static_cast<uint8_t>(i + 7));
      rbufs.emplace_back(sizes[i], 0);
    }
    for (int i = 0; i < 4; ++i)
      ASSERT_EQ(net_->isend(p->send, sbufs[i].data(), sizes[i], 700 + i, nullptr, &sreq[i]), ncclSuccess);
    // Let the sends reach the socket before any receive is posted.
    for (int spin = 0; spin < 100; ++spin)
      for (void*& req : sreq) {
        int done = 0;
        if (req != nullptr) {
          ASSERT_EQ(net_->test(req, &done, nullptr), ncclSuccess);
          if (done) req = nullptr;
        }
      }
    for (int i = 0; i < 4; ++i)
      ASSERT_EQ(net_->irecv(p->recv, rbufs[i].data(), sizes[i], 700 + i, nullptr, &rreq[i]), ncclSuccess);
    int left = 8;
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (left > 0 && Clock::now() < deadline) {
      left = 0;
      for (std::vector<void*>* reqs : {&sreq, &rreq})
        for (void*& req : *reqs) {
          if (req == nullptr) continue;
          int done = 0;
          ASSERT_EQ(net_->test(req, &done, nullptr), ncclSuccess);
          if (done)
            req = nullptr;
          else
            ++left;
        }
    }
    ASSERT_EQ(left, 0) << "messages right behind the move did not arrive";
    for (int i = 0; i < 4; ++i) EXPECT_EQ(rbufs[i], sbufs[i]) << "message " << i;
  }
  EXPECT_NE(a_.sendComm()->moved(), b_.sendComm()->moved());
}

// A direction may move onto a connection whose sender has just closed (the
// goodbye still on its way): the closed sender's socket is kept for the
// receiver that follows the move. Connection ids are random and the smaller
// side moves, so both connections are drawn anew until one moves: each try
// moves with probability 1/2. (Keeping the first connection across tries
// failed about once in 41 runs: when its id happened to be small, almost no
// new one was smaller.)
TEST_F(SocketDuplex, MoveOntoAConnectionWhoseSenderClosed) {
  bool movedOnce = false;
  for (int attempt = 0; attempt < 40 && !movedOnce; ++attempt) {
    open(&a_);
    ASSERT_NO_FATAL_FAILURE(message(a_, 100, 1));
    net_->closeSend(a_.send);
    a_.send = nullptr;
    open(&b_);
    ASSERT_NO_FATAL_FAILURE(message(b_, 8, 2));
    ASSERT_NO_FATAL_FAILURE(message(b_, 5000, 3));
    movedOnce = b_.sendComm()->moved();
    EXPECT_EQ(b_.recvComm()->moved(), movedOnce);
    for (Pair* p : {&b_, &a_}) {
      if (p->send) net_->closeSend(p->send);
      net_->closeRecv(p->recv);
      net_->closeListen(p->listen);
      *p = Pair{};
    }
  }
  EXPECT_TRUE(movedOnce) << "no connection moved onto the one whose sender closed";
}

TEST_F(SocketDuplex, KnobKeepsOneConnectionPerDirection) {
  ScopedEnv off{EnvList{{"CHORUS_SOCKET_DUPLEX", "0"}}};
  open(&a_);
  open(&b_);
  for (int i = 0; i < 3; ++i) {
    ASSERT_NO_FATAL_FAILURE(message(a_, 8, i));
    ASSERT_NO_FATAL_FAILURE(message(b_, 8, i));
  }
  EXPECT_FALSE(a_.sendComm()->moved());
  EXPECT_FALSE(b_.sendComm()->moved());
}

}  // namespace
}  // namespace chorus::test
