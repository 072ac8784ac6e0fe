// The socket backend through its chorusNet_v1_t table, driven from the test
// thread (no proxy): setup, messages from 0 B to 8 MiB over several streams,
// tag order, a stranger with the wrong nonce, and a peer that goes away.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include "common/rank_runner.h"
#include "net_test_util.h"
#include "transports/net_socket/socket_backend.h"
#include "transports/net_socket/socket_comm.h"
#include "transports/net_socket/socket_setup.h"

namespace chorus::test {
namespace {

using Clock = std::chrono::steady_clock;

using EnvList = std::vector<std::pair<std::string, std::string>>;

class SocketBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    net_ = netSocketBackend();
    ASSERT_EQ(net_->init(nullptr), ncclSuccess);
    int ndev = 0;
    ASSERT_EQ(net_->devices(&ndev), ncclSuccess);
    ASSERT_EQ(ndev, 1) << "NCCL_SOCKET_IFNAME=lo must leave exactly the loopback device";
  }
  void TearDown() override {
    if (send_) net_->closeSend(send_);
    if (recv_) net_->closeRecv(recv_);
    if (listen_) net_->closeListen(listen_);
  }

  // listen + connect + accept (bounded).
  void connectPair() {
    ASSERT_EQ(net_->listen(0, handle_, &listen_), ncclSuccess);
    ASSERT_EQ(net_->connect(0, handle_, &send_), ncclSuccess);
    ASSERT_NE(send_, nullptr);
    acceptWithin(5000);
    ASSERT_NE(recv_, nullptr) << "accept did not complete";
  }
  void acceptWithin(int ms) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
    while (recv_ == nullptr && Clock::now() < deadline) {
      ASSERT_EQ(net_->accept(listen_, &recv_), ncclSuccess);
      if (recv_ == nullptr) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // A buffer a request may still read or write: it lives until TearDown has
  // closed the comms (their helper threads joined), also when an assertion
  // ends the test with requests in flight.
  std::vector<uint8_t>& hold(std::vector<uint8_t> bytes) { return held_.emplace_back(std::move(bytes)); }

  ScopedEnv env_{EnvList{{"NCCL_SOCKET_IFNAME", "lo"}, {"NCCL_NSOCKS_PERTHREAD", "2"}, {"NCCL_SOCKET_NTHREADS", "2"}}};
  std::deque<std::vector<uint8_t>> held_;  // deque: references stay valid as it grows
  const chorusNet_v1_t* net_ = nullptr;
  char handle_[CHORUS_NET_HANDLE_BYTES] = {};
  void* listen_ = nullptr;
  void* send_ = nullptr;
  void* recv_ = nullptr;
};

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 + seed + (i >> 12));
  return v;
}

TEST_F(SocketBackend, PropertiesDescribeLoopback) {
  chorusNetProperties_v1_t props{};
  ASSERT_EQ(net_->getProperties(0, &props), ncclSuccess);
  EXPECT_STREQ(props.name, "lo");
  EXPECT_EQ(props.ptrSupport, CHORUS_NET_PTR_HOST);
  EXPECT_GT(props.maxMessageBytes, size_t(8) << 20);
  EXPECT_NE(net_->getProperties(1, &props), ncclSuccess);
}

TEST_F(SocketBackend, MessagesOfEverySizeOverSeveralStreams) {
  connectPair();
  void* smh = nullptr;
  void* rmh = nullptr;
  const size_t sizes[] = {0, 1, 100, 65536, 65537, (1u << 20) + 3, 8u << 20};
  std::vector<uint8_t>& rbuf = hold(std::vector<uint8_t>((8u << 20) + 16));
  ASSERT_EQ(net_->regMr(send_, rbuf.data(), rbuf.size(), CHORUS_NET_PTR_HOST, &smh), ncclSuccess);
  ASSERT_EQ(net_->regMr(recv_, rbuf.data(), rbuf.size(), CHORUS_NET_PTR_HOST, &rmh), ncclSuccess);
  uint8_t seed = 1;
  for (size_t n : sizes) {
    std::vector<uint8_t>& sbuf = hold(pattern(n, seed));
    std::memset(rbuf.data(), 0xEE, rbuf.size());
    void *rreq = nullptr, *sreq = nullptr;
    ASSERT_EQ(net_->irecv(recv_, rbuf.data(), rbuf.size(), 7, rmh, &rreq), ncclSuccess);
    ASSERT_EQ(net_->isend(send_, sbuf.data(), n, 7, smh, &sreq), ncclSuccess);
    ASSERT_NE(rreq, nullptr);
    ASSERT_NE(sreq, nullptr);
    size_t got = 12345, sent = 0;
    int sdone = 0, rdone = 0;
    // Both sides progress from this thread, as the proxy would drive them.
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while ((!sdone || !rdone) && Clock::now() < deadline) {
      if (!sdone) {
        ASSERT_EQ(net_->test(sreq, &sdone, &sent), ncclSuccess) << n;
      }
      if (!rdone) {
        ASSERT_EQ(net_->test(rreq, &rdone, &got), ncclSuccess) << n;
      }
    }
    ASSERT_TRUE(sdone && rdone) << "message of " << n << " bytes did not finish";
    EXPECT_EQ(sent, n);
    ASSERT_EQ(got, n);
    // memcmp's pointers must not be null even for 0 bytes (an empty vector's data() may be).
    EXPECT_TRUE(n == 0 || std::memcmp(rbuf.data(), sbuf.data(), n) == 0) << "payload of " << n << " bytes differs";
    EXPECT_EQ(rbuf[n], 0xEE) << "wrote past the message";
    ++seed;
  }
  EXPECT_EQ(net_->deregMr(send_, smh), ncclSuccess);
  EXPECT_EQ(net_->deregMr(recv_, rmh), ncclSuccess);
}

TEST_F(SocketBackend, ManyMessagesInFlightArriveInOrderWithTheirTags) {
  connectPair();
  constexpr int kMsgs = 6;
  const size_t sizes[kMsgs] = {10, 300000, 0, 70000, 5, 2u << 20};
  std::vector<uint8_t>* sbufs[kMsgs];
  std::vector<uint8_t>* rbufs[kMsgs];
  void *sreq[kMsgs], *rreq[kMsgs];
  for (int i = 0; i < kMsgs; ++i) {
    sbufs[i] = &hold(pattern(sizes[i], static_cast<uint8_t>(40 + i)));
    rbufs[i] = &hold(std::vector<uint8_t>(sizes[i] + 1, 0));
    ASSERT_EQ(net_->irecv(recv_, rbufs[i]->data(), rbufs[i]->size(), 100 + i, nullptr, &rreq[i]), ncclSuccess);
  }
  for (int i = 0; i < kMsgs; ++i)
    ASSERT_EQ(net_->isend(send_, sbufs[i]->data(), sizes[i], 100 + i, nullptr, &sreq[i]), ncclSuccess);
  size_t sent[kMsgs] = {};
  auto testSends = [&] {
    for (int s = 0; s < kMsgs; ++s) {
      int sd = 0;
      if (sreq[s] == nullptr) continue;
      ASSERT_EQ(net_->test(sreq[s], &sd, &sent[s]), ncclSuccess);
      if (sd) sreq[s] = nullptr;
    }
  };
  // Complete the receives first, out of posting order (last first): the
  // backend must still place each message in the receive posted for it.
  for (int i = kMsgs - 1; i >= 0; --i) {
    size_t got = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    int done = 0;
    while (!done && Clock::now() < deadline) {
      ASSERT_EQ(net_->test(rreq[i], &done, &got), ncclSuccess);
      testSends();
    }
    ASSERT_TRUE(done) << "message " << i << " never arrived";
    ASSERT_EQ(got, sizes[i]);
    EXPECT_TRUE(sizes[i] == 0 || std::memcmp(rbufs[i]->data(), sbufs[i]->data(), sizes[i]) == 0) << "message " << i;
  }
  // A send may report done after its receive did (its helper thread has yet
  // to account the last bytes it wrote); each must report done, with its size.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  auto sendsLeft = [&] { return std::count(sreq, sreq + kMsgs, nullptr) != kMsgs; };
  while (sendsLeft() && Clock::now() < deadline) testSends();
  ASSERT_FALSE(sendsLeft()) << "a send never finished although its message arrived";
  for (int i = 0; i < kMsgs; ++i) EXPECT_EQ(sent[i], sizes[i]) << "send " << i;
}

// A receive that completes drains the socket; the receive behind it is not
// worth another recv until its waiter looks again, and that look must ask
// the socket (a message sent later still arrives).
TEST_F(SocketBackend, ASocketFoundDrainedIsAskedAgainOnlyByTheNextLook) {
  connectPair();
  auto* comm = static_cast<sock::SocketComm*>(recv_);
  char s0[8] = "first", s1[8] = "second";
  char r0[64] = {}, r1[64] = {};
  void *rreq0 = nullptr, *rreq1 = nullptr, *sreq = nullptr;
  ASSERT_EQ(net_->irecv(recv_, r0, sizeof(r0), 1, nullptr, &rreq0), ncclSuccess);
  ASSERT_EQ(net_->irecv(recv_, r1, sizeof(r1), 2, nullptr, &rreq1), ncclSuccess);
  EXPECT_EQ(comm->controlRecvs(), 0u) << "posting a receive looks for nothing";
  ASSERT_EQ(net_->isend(send_, s0, sizeof(s0), 1, nullptr, &sreq), ncclSuccess);
  auto waitDone = [&](void* req, void* buf, const char* want) {
    int done = 0;
    size_t got = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!done && Clock::now() < deadline) ASSERT_EQ(net_->test(req, &done, &got), ncclSuccess);
    ASSERT_TRUE(done) << want << " never arrived";
    EXPECT_EQ(got, 8u);
    EXPECT_STREQ(static_cast<char*>(buf), want);
  };
  waitDone(rreq0, r0, "first");
  const uint64_t afterFirst = comm->controlRecvs();
  int done = 1;
  ASSERT_EQ(net_->test(rreq1, &done, nullptr), ncclSuccess);
  EXPECT_EQ(done, 0);
  EXPECT_EQ(comm->controlRecvs(), afterFirst) << "the first look behind a drained socket asked it again";
  ASSERT_EQ(net_->test(rreq1, &done, nullptr), ncclSuccess);
  EXPECT_EQ(done, 0);
  EXPECT_EQ(comm->controlRecvs(), afterFirst + 1) << "the waiter's next look must ask the socket";
  int sdone = 0;
  while (!sdone) ASSERT_EQ(net_->test(sreq, &sdone, nullptr), ncclSuccess);
  ASSERT_EQ(net_->isend(send_, s1, sizeof(s1), 2, nullptr, &sreq), ncclSuccess);
  waitDone(rreq1, r1, "second");
}

TEST_F(SocketBackend, TagMismatchIsAnErrorNotACorruption) {
  connectPair();
  char s[16] = "hello", r[16] = {};
  void *sreq = nullptr, *rreq = nullptr;
  ASSERT_EQ(net_->irecv(recv_, r, sizeof(r), 1, nullptr, &rreq), ncclSuccess);
  ASSERT_EQ(net_->isend(send_, s, sizeof(s), 2, nullptr, &sreq), ncclSuccess);
  size_t n = 0;
  bool late = false;
  EXPECT_EQ(waitRequest(net_, rreq, &n, 5000, &late), ncclRemoteError);
  EXPECT_FALSE(late);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("tag"), std::string::npos) << ncclGetLastError(nullptr);
}

TEST_F(SocketBackend, StreamsWithTheWrongNonceAreRefused) {
  ASSERT_EQ(net_->listen(0, handle_, &listen_), ncclSuccess);
  char forged[CHORUS_NET_HANDLE_BYTES];
  std::memcpy(forged, handle_, sizeof(forged));
  forged[32] ^= 0x5a;  // inside the nonce (offset 32 of the handle)
  void* stranger = nullptr;
  ASSERT_EQ(net_->connect(0, forged, &stranger), ncclSuccess);  // TCP connects; the hello is refused
  acceptWithin(300);
  EXPECT_EQ(recv_, nullptr) << "a connection with the wrong nonce was accepted";
  // The refused sender finds out when it sends.
  std::vector<uint8_t>& big = hold(std::vector<uint8_t>(4u << 20, 1));
  void* req = nullptr;
  ASSERT_EQ(net_->isend(stranger, big.data(), big.size(), 0, nullptr, &req), ncclSuccess);
  size_t n = 0;
  bool late = false;
  EXPECT_EQ(waitRequest(net_, req, &n, 5000, &late), ncclRemoteError);
  EXPECT_FALSE(late) << "the refused sender's send hung";
  net_->closeSend(stranger);
  // The rightful sender is still accepted.
  ASSERT_EQ(net_->connect(0, handle_, &send_), ncclSuccess);
  acceptWithin(5000);
  EXPECT_NE(recv_, nullptr);
}

TEST_F(SocketBackend, OrderlyCloseEndsPendingReceives) {
  connectPair();
  char r[64];
  void* rreq = nullptr;
  ASSERT_EQ(net_->irecv(recv_, r, sizeof(r), 0, nullptr, &rreq), ncclSuccess);
  ASSERT_EQ(net_->closeSend(send_), ncclSuccess);
  send_ = nullptr;
  size_t n = 0;
  bool late = false;
  EXPECT_EQ(waitRequest(net_, rreq, &n, 5000, &late), ncclRemoteError);
  EXPECT_FALSE(late);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("127.0.0.1"), std::string::npos) << ncclGetLastError(nullptr);
}

TEST_F(SocketBackend, SenderToAVanishedReceiverGetsAnError) {
  connectPair();
  ASSERT_EQ(net_->closeRecv(recv_), ncclSuccess);
  recv_ = nullptr;
  std::vector<uint8_t>& big = hold(std::vector<uint8_t>(8u << 20, 3));
  ncclResult_t res = ncclSuccess;
  bool late = false;
  // Kernel buffers may swallow the first message; the connection reset shows by the next ones.
  for (int i = 0; i < 8 && res == ncclSuccess; ++i) {
    void* req = nullptr;
    res = net_->isend(send_, big.data(), big.size(), 0, nullptr, &req);
    if (res != ncclSuccess) break;
    size_t n = 0;
    res = waitRequest(net_, req, &n, 5000, &late);
    ASSERT_FALSE(late) << "send to a closed receiver hung";
  }
  EXPECT_EQ(res, ncclRemoteError);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("127.0.0.1"), std::string::npos) << ncclGetLastError(nullptr);
}

// Unset knobs (-2) follow NCCL's per-interface rule; set ones are honoured
// within the caps.
TEST(SocketStreamShape, UnsetKnobsFollowTheInterfaceAndSetOnesWin) {
  auto shape = [](const char* vendor, int64_t t, int64_t s) {
    const sock::StreamShape sh = sock::streamShapeFor(vendor, t, s);
    return std::make_pair(sh.nthreads, sh.nsocks);
  };
  using P = std::pair<uint32_t, uint32_t>;
  EXPECT_EQ(shape("", -2, -2), P(0, 1)) << "loopback, bridges, veth: no helper threads";
  EXPECT_EQ(shape("0x8086", -2, -2), P(0, 1)) << "an ordinary NIC";
  EXPECT_EQ(shape("0x1d0f", -2, -2), P(2, 8)) << "AWS";
  EXPECT_EQ(shape("0x1ae0", -2, -2), P(4, 1)) << "Google gVNIC";
  EXPECT_EQ(shape("", 2, 2), P(2, 2));
  EXPECT_EQ(shape("0x1d0f", 1, -2), P(1, 8)) << "an unset socket count keeps the interface's";
  EXPECT_EQ(shape("", 3, -2), P(3, 1));
  EXPECT_EQ(shape("0x1d0f", 0, -2), P(0, 8)) << "0 threads: control stream only";
  EXPECT_EQ(shape("", 100, 1), P(64, 1)) << "threads capped";
  EXPECT_EQ(shape("", 16, 16), P(16, 4)) << "threads x sockets capped at 64";
  EXPECT_EQ(shape("", -7, 0), P(0, 1)) << "nonsense clamps to the smallest shape";
}

}  // namespace
}  // namespace chorus::test
