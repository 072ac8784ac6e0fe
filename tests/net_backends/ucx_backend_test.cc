// The UCX backend driven through its chorusNet_v1_t table over loopback
// (NCCL_SOCKET_IFNAME=lo; UCX picks its own transports: tcp, shm, self here).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "chorus/net_plugin.h"
#include "common/rank_runner.h"
#include "net_backends/net_pair_util.h"
#ifdef CHORUS_HAVE_UCX  // the UCX sources are compiled only then
#include "transports/net_ucx/ucx_backend.h"
#include "transports/net_ucx/ucx_wire.h"
#endif

namespace chorus::test {
namespace {

#ifdef CHORUS_HAVE_UCX

TEST(UcxWire, HandleRoundTripsAndRejectsGarbage) {
  ucx::ListenHandle in;
  ASSERT_EQ(parseHostPort("127.0.0.1:4242", &in.addr), ncclSuccess);
  in.listenId = 0x1122334455667788ull;
  uint8_t bytes[CHORUS_NET_HANDLE_BYTES];
  ucx::encodeListenHandle(in, bytes);
  ucx::ListenHandle out;
  ASSERT_EQ(ucx::decodeListenHandle(bytes, &out), ncclSuccess);
  EXPECT_EQ(out.addr.str(), "127.0.0.1:4242");
  EXPECT_EQ(out.listenId, in.listenId);

  uint8_t broken[CHORUS_NET_HANDLE_BYTES];
  std::memcpy(broken, bytes, sizeof(bytes));
  broken[0] ^= 0xff;  // magic
  EXPECT_EQ(ucx::decodeListenHandle(broken, &out), ncclInvalidArgument);
  std::memcpy(broken, bytes, sizeof(bytes));
  broken[4] = 99;  // family
  EXPECT_EQ(ucx::decodeListenHandle(broken, &out), ncclInvalidArgument);
  std::memcpy(broken, bytes, sizeof(bytes));
  broken[6] = broken[7] = 0;  // port 0
  EXPECT_EQ(ucx::decodeListenHandle(broken, &out), ncclInvalidArgument);
  EXPECT_EQ(ucx::decodeListenHandle(nullptr, &out), ncclInvalidArgument);

  uint8_t welcome[ucx::kWelcomeBytes];
  ucx::encodeWelcome(77, welcome);
  uint32_t connId = 0;
  EXPECT_TRUE(ucx::decodeWelcome(welcome, &connId));
  EXPECT_EQ(connId, 77u);
  welcome[1] ^= 1;
  EXPECT_FALSE(ucx::decodeWelcome(welcome, &connId));
  EXPECT_EQ(ucx::dataTag(3, -1), 0x3ffffffffull);
}

class UcxBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = std::make_unique<ScopedEnv>(
        std::vector<std::pair<std::string, std::string>>{{"NCCL_SOCKET_IFNAME", "lo"}, {"CHORUS_TIMEOUT_MS", "5000"}});
    net_ = netUcxBackend();
    ASSERT_EQ(net_->init(nullptr), ncclSuccess);
    int ndev = 0;
    ASSERT_EQ(net_->devices(&ndev), ncclSuccess);
    if (ndev == 0) GTEST_SKIP() << "libucp could not be loaded";
    ASSERT_EQ(ndev, 1);
  }
  void TearDown() override { closePair(net_, &pair_); }

  // One message each way of the pair, posted and waited for together.
  void sendRecv(const void* src, size_t sendBytes, void* dst, size_t recvBytes, int tag, size_t* got) {
    std::vector<void*> reqs(2, nullptr);
    ASSERT_EQ(
        postWithRetry([&](void** r) { return net_->irecv(pair_.recvComm, dst, recvBytes, tag, nullptr, r); }, &reqs[0]),
        ncclSuccess);
    ASSERT_EQ(
        postWithRetry(
            [&](void** r) { return net_->isend(pair_.sendComm, const_cast<void*>(src), sendBytes, tag, nullptr, r); },
            &reqs[1]),
        ncclSuccess);
    std::vector<size_t> sizes;
    ASSERT_EQ(waitAll(net_, reqs, &sizes), ncclSuccess);
    EXPECT_EQ(sizes[1], sendBytes);
    *got = sizes[0];
  }

  std::unique_ptr<ScopedEnv> env_;
  const chorusNet_v1_t* net_ = nullptr;
  NetPair pair_;
};

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xff);
  return v;
}

TEST_F(UcxBackend, PropertiesDescribeLoopback) {
  chorusNetProperties_v1_t props{};
  ASSERT_EQ(net_->getProperties(0, &props), ncclSuccess);
  EXPECT_STREQ(props.name, "lo");
  // Host memory only, even with a CUDA-enabled UCX: it has no flush for data
  // a NIC wrote into GPU memory, so GPU-mode slots must be staged.
  EXPECT_EQ(props.ptrSupport, CHORUS_NET_PTR_HOST);
  EXPECT_GT(props.maxComms, 0);
  EXPECT_GE(props.maxMessageBytes, size_t{4} << 20);
  EXPECT_EQ(net_->getProperties(1, &props), ncclInvalidArgument);
  EXPECT_STREQ(net_->name, "UCX");
}

TEST_F(UcxBackend, MessagesFromZeroBytesToFourMiB) {
  ASSERT_EQ(connectPair(net_, 0, &pair_), ncclSuccess);
  const size_t sizes[] = {0, 1, 7, 4096, 65536 + 5, (size_t{1} << 20) + 3, size_t{4} << 20};
  uint32_t seed = 1;
  for (size_t n : sizes) {
    std::vector<uint8_t> src = pattern(n, seed++);
    std::vector<uint8_t> dst(n + 16, 0xee);
    size_t got = 12345;
    sendRecv(src.data(), n, dst.data(), dst.size(), 5, &got);
    ASSERT_EQ(got, n) << "message of " << n << " bytes";
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin())) << n << " bytes";
    EXPECT_EQ(dst[n], 0xee) << "receive wrote past the message";
  }
}

TEST_F(UcxBackend, ReceivePostedAfterArrivalReportsItsSize) {
  ASSERT_EQ(connectPair(net_, 0, &pair_), ncclSuccess);
  void* mh = nullptr;
  std::vector<uint8_t> dst(8192);
  ASSERT_EQ(net_->regMr(pair_.recvComm, dst.data(), dst.size(), CHORUS_NET_PTR_HOST, &mh), ncclSuccess);
  for (size_t n : {size_t{0}, size_t{1}, size_t{4000}, size_t{8192}}) {
    std::vector<uint8_t> src = pattern(n, static_cast<uint32_t>(n));
    std::vector<void*> reqs(2, nullptr);
    ASSERT_EQ(net_->isend(pair_.sendComm, src.data(), n, 0, nullptr, &reqs[1]), ncclSuccess);
    for (int i = 0; i < 100 && reqs[1] != nullptr; ++i) {  // let the message arrive before the receive exists
      int done = 0;
      ASSERT_EQ(net_->test(reqs[1], &done, nullptr), ncclSuccess);
      if (done) reqs[1] = nullptr;
    }
    ASSERT_EQ(net_->irecv(pair_.recvComm, dst.data(), dst.size(), 0, mh, &reqs[0]), ncclSuccess);
    std::vector<size_t> sizes;
    ASSERT_EQ(waitAll(net_, reqs, &sizes), ncclSuccess);
    EXPECT_EQ(sizes[0], n);
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin()));
  }
  EXPECT_EQ(net_->deregMr(pair_.recvComm, mh), ncclSuccess);
}

TEST_F(UcxBackend, MessageLargerThanReceiveIsAnError) {
  ASSERT_EQ(connectPair(net_, 0, &pair_), ncclSuccess);
  std::vector<uint8_t> src(1000), dst(100);
  std::vector<void*> reqs(2, nullptr);
  ASSERT_EQ(net_->irecv(pair_.recvComm, dst.data(), dst.size(), 1, nullptr, &reqs[0]), ncclSuccess);
  ASSERT_EQ(net_->isend(pair_.sendComm, src.data(), src.size(), 1, nullptr, &reqs[1]), ncclSuccess);
  ASSERT_NE(reqs[0], nullptr);
  EXPECT_EQ(waitAll(net_, reqs, nullptr), ncclInvalidUsage);
}

TEST_F(UcxBackend, SameTagMessagesArriveInOrderAndCompleteInOrder) {
  ASSERT_EQ(connectPair(net_, 0, &pair_), ncclSuccess);
  constexpr int kCount = 64;
  constexpr size_t kBytes = 3000;
  std::vector<std::vector<uint8_t>> src(kCount), dst(kCount, std::vector<uint8_t>(kBytes));
  std::vector<void*> recvs(kCount), sends(kCount);
  for (int i = 0; i < kCount; ++i) {
    src[i] = pattern(kBytes, 100 + i);
    ASSERT_EQ(net_->irecv(pair_.recvComm, dst[i].data(), kBytes, 9, nullptr, &recvs[i]), ncclSuccess);
    ASSERT_NE(recvs[i], nullptr);
  }
  for (int i = 0; i < kCount; ++i) {
    ASSERT_EQ(net_->isend(pair_.sendComm, src[i].data(), kBytes, 9, nullptr, &sends[i]), ncclSuccess);
    ASSERT_NE(sends[i], nullptr);
  }
  // Wait for the last receive only: in-order completion means every earlier
  // one is then finished too, and reports done at its first test.
  std::vector<void*> last = {recvs[kCount - 1]};
  ASSERT_EQ(waitAll(net_, sends, nullptr), ncclSuccess);
  ASSERT_EQ(waitAll(net_, last, nullptr), ncclSuccess);
  for (int i = 0; i < kCount - 1; ++i) {
    int done = 0;
    size_t size = 0;
    ASSERT_EQ(net_->test(recvs[i], &done, &size), ncclSuccess);
    EXPECT_EQ(done, 1) << "receive " << i << " not done after a later one completed";
    EXPECT_EQ(size, kBytes);
  }
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(dst[i], src[i]) << "message " << i;
}

TEST_F(UcxBackend, TagsMatchRegardlessOfPostingOrder) {
  ASSERT_EQ(connectPair(net_, 0, &pair_), ncclSuccess);
  constexpr int kTags = 128;
  constexpr size_t kBytes = 20000;  // past the eager limit of tcp on some configurations
  std::vector<std::vector<uint8_t>> src(kTags), dst(kTags, std::vector<uint8_t>(kBytes));
  std::vector<void*> reqs;
  for (int t = kTags - 1; t >= 0; --t) {  // receives in reverse tag order
    void* r = nullptr;
    ASSERT_EQ(net_->irecv(pair_.recvComm, dst[t].data(), kBytes, t, nullptr, &r), ncclSuccess);
    reqs.push_back(r);
  }
  for (int t = 0; t < kTags; ++t) {
    src[t] = pattern(kBytes, 1000 + t);
    void* r = nullptr;
    ASSERT_EQ(net_->isend(pair_.sendComm, src[t].data(), kBytes, t, nullptr, &r), ncclSuccess);
    reqs.push_back(r);
  }
  ASSERT_EQ(waitAll(net_, reqs, nullptr), ncclSuccess);
  for (int t = 0; t < kTags; ++t) EXPECT_EQ(dst[t], src[t]) << "tag " << t;
}

TEST_F(UcxBackend, ConnectionsSharingTheWorkerStayApart) {
  constexpr int kConns = 4;
  std::vector<NetPair> pairs(kConns);
  for (auto& p : pairs) ASSERT_EQ(connectPair(net_, 0, &p), ncclSuccess);
  constexpr size_t kBytes = 100000;
  std::vector<std::vector<uint8_t>> src(kConns), dst(kConns, std::vector<uint8_t>(kBytes));
  std::vector<void*> reqs;
  for (int c = 0; c < kConns; ++c) {
    void* r = nullptr;
    ASSERT_EQ(net_->irecv(pairs[c].recvComm, dst[c].data(), kBytes, 0, nullptr, &r), ncclSuccess);
    reqs.push_back(r);
  }
  for (int c = kConns - 1; c >= 0; --c) {  // same tag on every connection
    src[c] = pattern(kBytes, 50 + c);
    void* r = nullptr;
    ASSERT_EQ(net_->isend(pairs[c].sendComm, src[c].data(), kBytes, 0, nullptr, &r), ncclSuccess);
    reqs.push_back(r);
  }
  ASSERT_EQ(waitAll(net_, reqs, nullptr), ncclSuccess);
  for (int c = 0; c < kConns; ++c) EXPECT_EQ(dst[c], src[c]) << "connection " << c;
  for (auto& p : pairs) closePair(net_, &p);
}

TEST_F(UcxBackend, SenderAndReceiverThreadsWithManyOutstanding) {
  ASSERT_EQ(connectPair(net_, 0, &pair_), ncclSuccess);
  constexpr int kMessages = 600;
  constexpr int kWindow = 200;
  constexpr size_t kBytes = 8192;
  std::vector<std::vector<uint8_t>> src(kMessages), dst(kMessages, std::vector<uint8_t>(kBytes));
  for (int i = 0; i < kMessages; ++i) src[i] = pattern(kBytes, i);
  auto run = [&](bool send) {
    for (int base = 0; base < kMessages; base += kWindow) {
      std::vector<void*> reqs(kWindow, nullptr);
      for (int i = 0; i < kWindow; ++i) {
        int m = base + i;
        ncclResult_t res = postWithRetry(
            [&](void** r) {
              return send ? net_->isend(pair_.sendComm, src[m].data(), kBytes, 1, nullptr, r)
                          : net_->irecv(pair_.recvComm, dst[m].data(), kBytes, 1, nullptr, r);
            },
            &reqs[i]);
        ASSERT_EQ(res, ncclSuccess);
      }
      ASSERT_EQ(waitAll(net_, reqs, nullptr), ncclSuccess) << (send ? "sender" : "receiver");
    }
  };
  std::thread receiver([&] { run(false); });
  run(true);
  receiver.join();
  for (int i = 0; i < kMessages; ++i) ASSERT_EQ(dst[i], src[i]) << "message " << i;
}

TEST_F(UcxBackend, ClosedReceiverFailsPendingSendInBoundedTime) {
  ASSERT_EQ(connectPair(net_, 0, &pair_), ncclSuccess);
  ASSERT_EQ(net_->closeRecv(pair_.recvComm), ncclSuccess);
  pair_.recvComm = nullptr;
  std::vector<uint8_t> src(size_t{4} << 20, 1);
  auto start = std::chrono::steady_clock::now();
  ncclResult_t res = ncclSuccess;
  // The first sends may still be buffered locally; the peer's disconnect
  // must fail one of them (or the post) well before the deadline.
  for (int i = 0; i < 50 && res == ncclSuccess; ++i) {
    std::vector<void*> reqs(1, nullptr);
    res = postWithRetry([&](void** r) { return net_->isend(pair_.sendComm, src.data(), src.size(), 2, nullptr, r); },
                        &reqs[0]);
    if (res == ncclSuccess) res = waitAll(net_, reqs, nullptr, 8000);
  }
  EXPECT_EQ(res, ncclRemoteError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST_F(UcxBackend, ClosedSenderFailsPendingReceiveInBoundedTime) {
  ASSERT_EQ(connectPair(net_, 0, &pair_), ncclSuccess);
  std::vector<uint8_t> dst(1024);
  std::vector<void*> reqs(1, nullptr);
  ASSERT_EQ(net_->irecv(pair_.recvComm, dst.data(), dst.size(), 3, nullptr, &reqs[0]), ncclSuccess);
  ASSERT_EQ(net_->closeSend(pair_.sendComm), ncclSuccess);
  pair_.sendComm = nullptr;
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(waitAll(net_, reqs, nullptr, 8000), ncclRemoteError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(9));
}

TEST_F(UcxBackend, ConnectToClosedListenerFails) {
  char handle[CHORUS_NET_HANDLE_BYTES] = {};
  void* listenComm = nullptr;
  ASSERT_EQ(net_->listen(0, handle, &listenComm), ncclSuccess);
  ASSERT_EQ(net_->closeListen(listenComm), ncclSuccess);
  void* sendComm = nullptr;
  ncclResult_t res = ncclSuccess;
  auto deadline = deadlineIn(9000);
  while (res == ncclSuccess && sendComm == nullptr && std::chrono::steady_clock::now() < deadline)
    res = net_->connect(0, handle, &sendComm);
  EXPECT_EQ(res, ncclRemoteError);
  EXPECT_EQ(sendComm, nullptr);
}

TEST_F(UcxBackend, MisuseIsRejected) {
  ASSERT_EQ(connectPair(net_, 0, &pair_), ncclSuccess);
  uint8_t buf[8];
  void* req = nullptr;
  EXPECT_EQ(net_->isend(pair_.recvComm, buf, 8, 0, nullptr, &req), ncclInvalidUsage);
  EXPECT_EQ(net_->irecv(pair_.sendComm, buf, 8, 0, nullptr, &req), ncclInvalidUsage);
  EXPECT_EQ(req, nullptr);
  char garbage[CHORUS_NET_HANDLE_BYTES] = {1, 2, 3};
  void* sendComm = nullptr;
  EXPECT_EQ(net_->connect(0, garbage, &sendComm), ncclInvalidArgument);
  void* mh = nullptr;
  ASSERT_EQ(net_->regMr(pair_.sendComm, buf, sizeof(buf), CHORUS_NET_PTR_HOST, &mh), ncclSuccess);
  EXPECT_NE(mh, nullptr);
  EXPECT_EQ(net_->deregMr(pair_.sendComm, mh), ncclSuccess);
}

#endif  // CHORUS_HAVE_UCX

}  // namespace
}  // namespace chorus::test
