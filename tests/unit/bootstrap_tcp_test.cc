// The TCP store: clients in threads and in forked processes, strangers that
// misbehave, a server that dies, and the server's shutdown rule. Loopback only.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "bootstrap/store_registry.h"
#include "bootstrap/tcp_store_client.h"
#include "bootstrap/tcp_store_server.h"
#include "bootstrap/unique_id.h"
#include "core/log.h"
#include "core/params.h"
#include "core/result.h"
#include "unit/bootstrap_test_util.h"

namespace chorus {
namespace {

using namespace chorus::testing;
using Bytes = std::vector<uint8_t>;

Bytes bytesOf(const std::string& s) { return Bytes(s.begin(), s.end()); }

wire::Secret secretOf(uint8_t seed) {
  wire::Secret s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(seed + i);
  return s;
}

// A server on an ephemeral loopback port with a short stall limit.
std::shared_ptr<TcpStoreServer> startServer(const wire::Secret& secret, int64_t stallMs = 300) {
  TcpStoreServer::Options o;
  o.stallMs = stallMs;
  std::shared_ptr<TcpStoreServer> s;
  EXPECT_EQ(TcpStoreServer::start(loopback(0), secret, o, &s), ncclSuccess);
  return s;
}

// A directly started server keeps running (its thread holds a reference) until
// stopped; this stops it when the test ends, after the clients declared later.
struct StopOnExit {
  std::shared_ptr<TcpStoreServer> server;
  ~StopOnExit() {
    if (server) server->stop();
  }
};

std::shared_ptr<Store> tcpClient(const std::shared_ptr<TcpStoreServer>& srv, const wire::Secret& secret, int rank) {
  std::shared_ptr<Store> c;
  EXPECT_EQ(connectTcpStore(srv->address(), secret, rank, waitBoundAfter(3000), &c), ncclSuccess);
  return c;
}

std::vector<uint8_t> helloFrame(const wire::Secret& secret) {
  return wire::Writer(wire::Op::Hello, 7)
      .u32(wire::kMagic)
      .u16(wire::kVersion)
      .raw(secret.data(), secret.size())
      .u32(0)
      .finish();
}

// A live key is computed when a get arrives, by the server's thread: a
// remote client sees the value of that moment; it is never missing, and
// once removed a get waits for it like any other key.
TEST(BootstrapTcp, LiveKeysAreAnsweredByTheServerThread) {
  auto secret = secretOf(3);
  auto srv = startServer(secret);
  StopOnExit stopSrv{srv};
  std::atomic<int> value{7};
  std::atomic<bool> onServerThread{false};
  const auto caller = std::this_thread::get_id();
  srv->data().setLive("status/1", [&] {
    onServerThread = std::this_thread::get_id() != caller;
    return Bytes{static_cast<uint8_t>(value.load())};
  });
  auto c = tcpClient(srv, secret, 1);
  std::vector<Bytes> v;
  ASSERT_EQ(c->get({"status/1"}, &v, waitBoundAfter(2000)), ncclSuccess);
  EXPECT_EQ(v[0], Bytes{7});
  EXPECT_TRUE(onServerThread.load());
  value = 9;
  ASSERT_EQ(c->get({"status/1"}, &v, waitBoundAfter(2000)), ncclSuccess);
  EXPECT_EQ(v[0], Bytes{9});
  EXPECT_EQ(srv->data().size(), 0u);
  srv->data().removeLive("status/1");
  EXPECT_EQ(c->get({"status/1"}, &v, waitBoundAfter(100)), ncclRemoteError);
}

TEST(BootstrapTcp, ThreadsShareDataWithTheInProcessStore) {
  auto secret = secretOf(1);
  auto srv = startServer(secret);
  StopOnExit stopSrv{srv};
  auto local = srv->attachLocal();
  ASSERT_NE(local, nullptr);
  constexpr int kClients = 4;
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int r = 1; r <= kClients; ++r)
    ts.emplace_back([&, r] {
      auto c = tcpClient(srv, secret, r);
      if (c == nullptr) return;
      int64_t n = 0;
      std::vector<Bytes> v;
      bool good = c->set("k" + std::to_string(r), bytesOf("v" + std::to_string(r))) == ncclSuccess &&
                  c->add("arrived", 1, &n) == ncclSuccess &&
                  c->get({"k1", "k2", "k3", "k4", "from-local"}, &v, waitBoundAfter(3000)) == ncclSuccess &&
                  v[r - 1] == bytesOf("v" + std::to_string(r)) && v[4] == bytesOf("hello");
      if (good) ok++;
    });
  // The in-process user's set wakes gets parked on the server.
  std::vector<Bytes> v;
  ASSERT_EQ(local->get({"k1", "k2", "k3", "k4"}, &v, waitBoundAfter(3000)), ncclSuccess);
  EXPECT_EQ(v[2], bytesOf("v3"));
  ASSERT_EQ(local->set("from-local", bytesOf("hello")), ncclSuccess);
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), kClients);
  int64_t n = 0;
  ASSERT_EQ(local->add("arrived", 0, &n), ncclSuccess);
  EXPECT_EQ(n, kClients);
  EXPECT_EQ(srv->refusedConnections(), 0u);
}

TEST(BootstrapTcp, OneClientServesConcurrentCallersAndErases) {
  auto secret = secretOf(2);
  auto srv = startServer(secret);
  StopOnExit stopSrv{srv};
  auto c = tcpClient(srv, secret, 0);
  ASSERT_NE(c, nullptr);
  // Several threads block in get() on one connection while another sets.
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int i = 0; i < 6; ++i)
    ts.emplace_back([&, i] {
      std::vector<Bytes> v;
      if (c->get({"w" + std::to_string(i)}, &v, waitBoundAfter(3000)) == ncclSuccess &&
          v[0] == bytesOf(std::to_string(i * i)))
        ok++;
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int i = 5; i >= 0; --i) ASSERT_EQ(c->set("w" + std::to_string(i), bytesOf(std::to_string(i * i))), ncclSuccess);
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 6);
  // Large values go through intact.
  Bytes big(3 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 31 + 7);
  ASSERT_EQ(c->set("big", big), ncclSuccess);
  std::vector<Bytes> v;
  ASSERT_EQ(c->get({"big"}, &v, waitBoundAfter(3000)), ncclSuccess);
  EXPECT_EQ(v[0], big);
  ASSERT_EQ(c->erasePrefix("w"), ncclSuccess);
  EXPECT_EQ(srv->data().size(), 1u);
  // A counter error comes back as an error, not a dropped connection.
  int64_t n = 0;
  EXPECT_EQ(c->add("big", 1, &n), ncclInvalidUsage);
  ASSERT_EQ(c->add("ctr", 2, &n), ncclSuccess);
  EXPECT_EQ(n, 2);
}

TEST(BootstrapTcp, GetTimeoutAndAbortNameTheKeyAndClearTheServerSide) {
  auto secret = secretOf(3);
  auto srv = startServer(secret);
  StopOnExit stopSrv{srv};
  auto c = tcpClient(srv, secret, 0);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->set("here", {}), ncclSuccess);
  auto t0 = Clock::now();
  std::vector<Bytes> v;
  EXPECT_EQ(c->get({"here", "missing"}, &v, waitBoundAfter(150)), ncclRemoteError);
  EXPECT_GE(msSince(t0), 140);
  EXPECT_LT(msSince(t0), 1500);
  std::string msg = lastErrorMessage();
  EXPECT_NE(msg.find("timed out"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'missing'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(srv->address().str()), std::string::npos) << msg;
  EXPECT_EQ(srv->data().pendingWatches(), 0u);

  std::atomic<bool> abort{false};
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(80));
    abort = true;
  });
  t0 = Clock::now();
  EXPECT_EQ(c->get({"missing"}, &v, waitBoundAfter(10000, &abort)), ncclRemoteError);
  EXPECT_LT(msSince(t0), 1500);
  EXPECT_NE(std::string(lastErrorMessage()).find("aborted"), std::string::npos);
  aborter.join();
  // The connection is still good afterwards.
  ASSERT_EQ(c->set("missing", bytesOf("x")), ncclSuccess);
  ASSERT_EQ(c->get({"missing"}, &v, waitBoundAfter(1000)), ncclSuccess);
  EXPECT_EQ(v[0], bytesOf("x"));
}

TEST(BootstrapTcp, ForkedChildAndParentExchangeThroughConnectStore) {
  ncclUniqueId id;
  ASSERT_EQ(createUniqueIdFrom("", "", "lo", &id), ncclSuccess);
  std::shared_ptr<Store> parent;
  ASSERT_EQ(connectStore(id, 0, waitBoundAfter(3000), &parent), ncclSuccess);
  UniqueIdInfo info;
  ASSERT_EQ(decodeUniqueId(id, &info), ncclSuccess);
  auto srv = findRegisteredServer(info.addr, info.secret);
  ASSERT_NE(srv, nullptr);
  EXPECT_EQ(srv->tcpClients(), 0);  // the parent's store is the in-process one
  pid_t child = forkChild([&] {
    // A different process: the same id now means a TCP connection.
    std::shared_ptr<Store> s;
    CHILD_CHECK(connectStore(id, 1, waitBoundAfter(3000), &s) == ncclSuccess);
    CHILD_CHECK(s->set("from-child", bytesOf("hi parent")) == ncclSuccess);
    std::vector<Bytes> v;
    CHILD_CHECK(s->get({"from-parent"}, &v, waitBoundAfter(3000)) == ncclSuccess);
    CHILD_CHECK(v[0] == bytesOf("hi child"));
    int64_t n = 0;
    CHILD_CHECK(s->add("count", 10, &n) == ncclSuccess);
    return 0;
  });
  std::vector<Bytes> v;
  ASSERT_EQ(parent->get({"from-child"}, &v, waitBoundAfter(3000)), ncclSuccess);
  EXPECT_EQ(v[0], bytesOf("hi parent"));
  EXPECT_EQ(srv->tcpClients(), 1);
  ASSERT_EQ(parent->set("from-parent", bytesOf("hi child")), ncclSuccess);
  EXPECT_EQ(waitChild(child), 0);
  int64_t n = 0;
  ASSERT_EQ(parent->add("count", 1, &n), ncclSuccess);
  EXPECT_EQ(n, 11);
}

TEST(BootstrapTcp, StrangersAreRefusedWhileRealClientsCarryOn) {
  auto secret = secretOf(4);
  auto srv = startServer(secret, 300);
  StopOnExit stopSrv{srv};
  auto good = tcpClient(srv, secret, 0);
  ASSERT_NE(good, nullptr);
  // A legitimate get stays parked across all the trouble below.
  std::vector<Bytes> parked;
  ncclResult_t parkedRes = ncclInternalError;
  std::thread waiter([&] { parkedRes = good->get({"finally"}, &parked, waitBoundAfter(8000)); });

  bool checkLog = logEnabled(LogLevel::Warn, kLogBootstrap) && params::debugFile().empty();
  if (checkLog) ::testing::internal::CaptureStderr();
  // 1. Garbage: an HTTP request reads as an absurd frame length.
  int g = rawConnect(srv->address());
  ASSERT_GE(g, 0);
  const char http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  rawSend(g, http, sizeof(http) - 1);
  EXPECT_TRUE(closedByPeerWithin(g, 2000));
  close(g);
  if (checkLog) {
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("bootstrap: refused connection from 127.0.0.1:"), std::string::npos) << err;
  }
  // 2. Wrong secret through the real client: refused at the handshake, quickly.
  auto t0 = Clock::now();
  std::shared_ptr<Store> bad;
  EXPECT_EQ(connectTcpStore(srv->address(), secretOf(5), 9, waitBoundAfter(5000), &bad), ncclRemoteError);
  EXPECT_LT(msSince(t0), 1500);
  EXPECT_NE(std::string(lastErrorMessage()).find("handshake"), std::string::npos);
  // 3. Authenticated, then an oversized frame.
  int o = rawConnect(srv->address());
  auto hello = helloFrame(secret);
  rawSend(o, hello.data(), hello.size());
  uint8_t huge[9] = {0xff, 0xff, 0xff, 0x7f, 2, 0, 0, 0, 0};
  rawSend(o, huge, sizeof(huge));
  EXPECT_TRUE(closedByPeerWithin(o, 2000));
  close(o);
  // 4. A half frame that stalls, and 5. a connection that never says hello.
  int h = rawConnect(srv->address());
  rawSend(h, hello.data(), hello.size());
  uint8_t half[10] = {100, 0, 0, 0, 2, 1, 0, 0, 0, 3};
  rawSend(h, half, sizeof(half));
  int silent = rawConnect(srv->address());
  t0 = Clock::now();
  EXPECT_TRUE(closedByPeerWithin(h, 3000));
  EXPECT_GE(msSince(t0), 200);
  EXPECT_TRUE(closedByPeerWithin(silent, 3000));
  close(h);
  close(silent);
  EXPECT_EQ(srv->refusedConnections(), 5u);

  // The real client was never disturbed.
  auto other = tcpClient(srv, secret, 1);
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(other->set("finally", bytesOf("done")), ncclSuccess);
  waiter.join();
  EXPECT_EQ(parkedRes, ncclSuccess);
  ASSERT_EQ(parked.size(), 1u);
  EXPECT_EQ(parked[0], bytesOf("done"));
  EXPECT_FALSE(srv->finished());
}

TEST(BootstrapTcp, KilledServerFailsPendingGetsPromptly) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = forkChild([&] {
    close(fds[0]);
    ncclUniqueId id;
    CHILD_CHECK(createUniqueIdFrom("", "", "lo", &id) == ncclSuccess);
    CHILD_CHECK(write(fds[1], &id, sizeof(id)) == static_cast<ssize_t>(sizeof(id)));
    pause();  // serve until killed
    return 0;
  });
  close(fds[1]);
  ncclUniqueId id;
  ASSERT_EQ(read(fds[0], &id, sizeof(id)), static_cast<ssize_t>(sizeof(id)));
  close(fds[0]);
  std::shared_ptr<Store> s;
  ASSERT_EQ(connectStore(id, 1, waitBoundAfter(3000), &s), ncclSuccess);
  ASSERT_EQ(s->set("alive", {}), ncclSuccess);
  ncclResult_t res = ncclSuccess;
  std::string msg;
  Clock::time_point ended;
  std::thread waiter([&] {
    std::vector<Bytes> v;
    res = s->get({"never"}, &v, waitBoundAfter(10000));
    ended = Clock::now();
    msg = lastErrorMessage();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  auto killed = Clock::now();
  kill(child, SIGKILL);
  EXPECT_EQ(waitChild(child), -SIGKILL);
  waiter.join();
  EXPECT_EQ(res, ncclRemoteError);
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(ended - killed).count(), 3000);
  EXPECT_NE(msg.find(describeUniqueId(id)), std::string::npos) << msg;
  EXPECT_NE(msg.find("lost the connection"), std::string::npos) << msg;
  // Later calls fail at once too.
  auto t0 = Clock::now();
  EXPECT_EQ(s->set("x", {}), ncclRemoteError);
  EXPECT_LT(msSince(t0), 500);
}

TEST(BootstrapTcp, ConnectRetriesUntilTheServerAppearsOrTheDeadline) {
  uint16_t port = freeLoopbackPort();
  auto secret = secretOf(6);
  auto t0 = Clock::now();
  std::shared_ptr<Store> s;
  EXPECT_EQ(connectTcpStore(loopback(port), secret, 0, waitBoundAfter(250), &s), ncclRemoteError);
  EXPECT_GE(msSince(t0), 240);
  EXPECT_LT(msSince(t0), 1500);
  EXPECT_NE(std::string(lastErrorMessage()).find("connecting to store server 127.0.0.1:"), std::string::npos);

  ncclResult_t res = ncclInternalError;
  std::thread late([&] { res = connectTcpStore(loopback(port), secret, 0, waitBoundAfter(5000), &s); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::shared_ptr<TcpStoreServer> srv;
  ASSERT_EQ(TcpStoreServer::start(loopback(port), secret, TcpStoreServer::Options{}, &srv), ncclSuccess);
  StopOnExit stopSrv{srv};
  late.join();
  ASSERT_EQ(res, ncclSuccess);
  ASSERT_EQ(s->set("k", {}), ncclSuccess);
  // The server answers a set before it applies it; a get is served after.
  std::vector<std::vector<uint8_t>> got;
  ASSERT_EQ(s->get({"k"}, &got, waitBoundAfter(2000)), ncclSuccess);
  EXPECT_EQ(srv->data().size(), 1u);
}

TEST(BootstrapTcp, ServerStopsOnceEveryClientHasLeft) {
  ncclUniqueId id;
  ASSERT_EQ(createUniqueIdFrom("", "", "lo", &id), ncclSuccess);
  UniqueIdInfo info;
  ASSERT_EQ(decodeUniqueId(id, &info), ncclSuccess);
  auto srv = findRegisteredServer(info.addr, info.secret);
  ASSERT_NE(srv, nullptr);
  std::shared_ptr<Store> local, remote;
  ASSERT_EQ(connectStore(id, 0, waitBoundAfter(3000), &local), ncclSuccess);
  ASSERT_EQ(connectTcpStore(info.addr, info.secret, 1, waitBoundAfter(3000), &remote), ncclSuccess);
  local.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(srv->finished());  // the remote client still counts
  ASSERT_EQ(remote->set("still", {}), ncclSuccess);
  remote.reset();
  auto t0 = Clock::now();
  while (!srv->finished() && msSince(t0) < 3000) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(srv->finished());
  EXPECT_LT(rawConnect(info.addr), 0);  // no longer listening
  // A late rank is told so at once instead of retrying until its deadline.
  t0 = Clock::now();
  EXPECT_EQ(connectStore(id, 2, waitBoundAfter(5000), &local), ncclInvalidUsage);
  EXPECT_LT(msSince(t0), 500);
  EXPECT_NE(std::string(lastErrorMessage()).find("already shut down"), std::string::npos);
}

}  // namespace
}  // namespace chorus
