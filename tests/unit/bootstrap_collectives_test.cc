// Bootstrap collectives over the store: ranks as threads (in-process store and
// TCP), as forked processes, and under NCCL_COMM_ID. Loopback only.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/store_registry.h"
#include "bootstrap/tcp_store_client.h"
#include "bootstrap/unique_id.h"
#include "core/result.h"
#include "unit/bootstrap_test_util.h"

namespace chorus {
namespace {

using namespace chorus::testing;

// Runs every helper on one rank and checks the results; returns "" or what went wrong.
std::string exercise(Bootstrap& b) {
  const int r = b.rank(), n = b.nranks();
  auto bound = [] { return waitBoundAfter(5000); };
  for (int iter = 0; iter < 3; ++iter) {
    std::vector<int> all(n, -1);
    int mine = r * 100 + iter;
    if (b.allGather(&mine, sizeof(int), all.data(), bound()) != ncclSuccess) return lastErrorMessage();
    for (int p = 0; p < n; ++p)
      if (all[p] != p * 100 + iter) return "allGather iter " + std::to_string(iter) + " wrong at " + std::to_string(p);
  }
  // In place: my slot already holds my contribution.
  std::vector<uint64_t> inplace(n, 0);
  inplace[r] = 0xabc0u + r;
  if (b.allGather(&inplace[r], sizeof(uint64_t), inplace.data(), bound()) != ncclSuccess) return lastErrorMessage();
  for (int p = 0; p < n; ++p)
    if (inplace[p] != 0xabc0u + p) return "in-place allGather wrong";
  if (b.barrier(bound()) != ncclSuccess) return lastErrorMessage();
  for (int root = 0; root < n; ++root) {
    std::vector<uint8_t> buf(33, 0);
    if (r == root)
      for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(root * 7 + i);
    if (b.broadcast(buf.data(), buf.size(), root, bound()) != ncclSuccess) return lastErrorMessage();
    for (size_t i = 0; i < buf.size(); ++i)
      if (buf[i] != static_cast<uint8_t>(root * 7 + i)) return "broadcast from " + std::to_string(root) + " wrong";
  }
  // Ring exchange on two tags; two messages per tag must arrive in order.
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  for (int m = 0; m < 2; ++m) {
    if (b.send(next, "ring", {static_cast<uint8_t>(r), static_cast<uint8_t>(m)}) != ncclSuccess) return lastErrorMessage();
    if (b.send(prev, "back", {static_cast<uint8_t>(r + 50), static_cast<uint8_t>(m)}) != ncclSuccess) return lastErrorMessage();
  }
  for (int m = 0; m < 2; ++m) {
    std::vector<uint8_t> got;
    if (b.recv(prev, "ring", &got, bound()) != ncclSuccess) return lastErrorMessage();
    if (got != std::vector<uint8_t>{static_cast<uint8_t>(prev), static_cast<uint8_t>(m)}) return "ring message wrong";
    if (b.recv(next, "back", &got, bound()) != ncclSuccess) return lastErrorMessage();
    if (got != std::vector<uint8_t>{static_cast<uint8_t>(next + 50), static_cast<uint8_t>(m)}) return "back message wrong";
  }
  if (b.barrier(bound()) != ncclSuccess) return lastErrorMessage();
  return "";
}

// Runs `n` ranks as threads; connect(rank) provides each rank's store.
void runThreads(int n, const std::function<std::shared_ptr<Store>(int)>& connect, const std::string& prefix) {
  std::vector<std::string> errors(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      auto store = connect(r);
      if (store == nullptr) {
        errors[r] = "no store";
        return;
      }
      Bootstrap b(store, prefix, r, n);
      errors[r] = exercise(b);
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r << " of " << n;
}

std::shared_ptr<TcpStoreServer> serverOf(const ncclUniqueId& id) {
  UniqueIdInfo info;
  EXPECT_EQ(decodeUniqueId(id, &info), ncclSuccess);
  return findRegisteredServer(info.addr, info.secret);
}

TEST(BootstrapCollectives, OneToEightRanksAsThreadsInProcess) {
  ncclUniqueId id;
  ASSERT_EQ(createUniqueIdFrom("", "", "lo", &id), ncclSuccess);
  auto srv = serverOf(id);
  ASSERT_NE(srv, nullptr);
  // The server stops once all its clients are gone; this handle keeps it up
  // between the communicators below (an id normally serves one communicator).
  std::shared_ptr<Store> keep;
  ASSERT_EQ(connectStore(id, 0, waitBoundAfter(3000), &keep), ncclSuccess);
  for (int n = 1; n <= 8; ++n) {
    std::string prefix = "n" + std::to_string(n) + "/";
    runThreads(n, [&](int r) {
      std::shared_ptr<Store> s;
      return connectStore(id, r, waitBoundAfter(3000), &s) == ncclSuccess ? s : nullptr;
    }, prefix);
    // Everything but the last barrier's two keys has been collected.
    size_t expected = n == 1 ? 0 : 2;
    EXPECT_EQ(srv->data().size(), expected) << n << " ranks";
    srv->data().erasePrefix(prefix);
  }
  EXPECT_EQ(srv->tcpClients(), 0);
}

TEST(BootstrapCollectives, MixedInProcessAndTcpRanks) {
  ncclUniqueId id;
  ASSERT_EQ(createUniqueIdFrom("", "", "lo", &id), ncclSuccess);
  UniqueIdInfo info;
  ASSERT_EQ(decodeUniqueId(id, &info), ncclSuccess);
  std::shared_ptr<Store> keep;  // keeps the server up between the communicators
  ASSERT_EQ(connectStore(id, 0, waitBoundAfter(3000), &keep), ncclSuccess);
  for (int n : {2, 5, 8}) {
    runThreads(n, [&](int r) {
      std::shared_ptr<Store> s;
      ncclResult_t res = (r % 2 == 0) ? connectStore(id, r, waitBoundAfter(3000), &s)
                                      : connectTcpStore(info.addr, info.secret, r, waitBoundAfter(3000), &s);
      return res == ncclSuccess ? s : nullptr;
    }, "mixed" + std::to_string(n) + "/");
  }
}

TEST(BootstrapCollectives, ForkedProcessesUseTheTcpStore) {
  ncclUniqueId id;
  ASSERT_EQ(createUniqueIdFrom("", "", "lo", &id), ncclSuccess);
  constexpr int kRanks = 4;
  std::vector<pid_t> kids;
  for (int r = 1; r < kRanks; ++r)
    kids.push_back(forkChild([&, r] {
      std::shared_ptr<Store> s;
      CHILD_CHECK(connectStore(id, r, waitBoundAfter(5000), &s) == ncclSuccess);
      Bootstrap b(s, "forked/", r, kRanks);
      std::string err = exercise(b);
      if (!err.empty()) fprintf(stderr, "rank %d: %s\n", r, err.c_str());
      return err.empty() ? 0 : 1;
    }));
  std::shared_ptr<Store> s;
  ASSERT_EQ(connectStore(id, 0, waitBoundAfter(3000), &s), ncclSuccess);
  Bootstrap b(s, "forked/", 0, kRanks);
  EXPECT_EQ(exercise(b), "");
  for (pid_t k : kids) EXPECT_EQ(waitChild(k), 0);
  auto srv = serverOf(id);
  ASSERT_NE(srv, nullptr);
  auto t0 = Clock::now();
  while (srv->tcpClients() != 0 && msSince(t0) < 2000) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(srv->tcpClients(), 0);  // the children's exits closed their connections
}

TEST(BootstrapCollectives, BarrierHoldsEveryoneUntilTheLastArrives) {
  ncclUniqueId id;
  ASSERT_EQ(createUniqueIdFrom("", "", "lo", &id), ncclSuccess);
  constexpr int kRanks = 5;
  std::atomic<int> arrived{0};
  std::atomic<int> early{0};
  std::vector<std::thread> ts;
  for (int r = 0; r < kRanks; ++r)
    ts.emplace_back([&, r] {
      std::shared_ptr<Store> s;
      if (connectStore(id, r, waitBoundAfter(3000), &s) != ncclSuccess) return;
      Bootstrap b(s, "bar/", r, kRanks);
      for (int round = 1; round <= 3; ++round) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10 * ((r + round) % kRanks)));
        arrived++;
        if (b.barrier(waitBoundAfter(5000)) != ncclSuccess || arrived.load() < round * kRanks) early++;
        b.barrier(waitBoundAfter(5000));  // keep rounds apart
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(arrived.load(), 3 * kRanks);
  EXPECT_EQ(early.load(), 0);
}

TEST(BootstrapCollectives, MissingRankTimesOutNamingItsKey) {
  ncclUniqueId id;
  ASSERT_EQ(createUniqueIdFrom("", "", "lo", &id), ncclSuccess);
  std::vector<std::string> msgs(2);
  std::vector<ncclResult_t> res(2);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r)  // rank 2 of 3 never shows up
    ts.emplace_back([&, r] {
      std::shared_ptr<Store> s;
      connectStore(id, r, waitBoundAfter(3000), &s);
      Bootstrap b(s, "late/", r, 3);
      int mine = r, all[3];
      res[r] = b.allGather(&mine, sizeof(int), all, waitBoundAfter(200));
      msgs[r] = lastErrorMessage();
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(res[r], ncclRemoteError);
    EXPECT_NE(msgs[r].find("late/e0/ag/2"), std::string::npos) << msgs[r];
  }
}

TEST(BootstrapCollectives, MisuseIsReported) {
  auto store = std::make_shared<MemStore>();
  Bootstrap a(store, "m/", 0, 2), b(store, "m/", 1, 2);
  std::vector<uint8_t> out;
  EXPECT_EQ(a.send(2, "t", {}), ncclInvalidArgument);
  EXPECT_EQ(a.recv(-1, "t", &out, waitBoundAfter(10)), ncclInvalidArgument);
  int x = 0;
  EXPECT_EQ(a.broadcast(&x, sizeof(x), 5, waitBoundAfter(10)), ncclInvalidArgument);
  // Ranks disagreeing on the size are told, not handed a truncated buffer.
  std::thread t([&] {
    int64_t big[2] = {1, 2};
    int64_t all[4];
    b.allGather(big, sizeof(big), all, waitBoundAfter(2000));
  });
  int small[2] = {0, 0};
  EXPECT_EQ(a.allGather(small, sizeof(int), small, waitBoundAfter(2000)), ncclInvalidUsage);
  EXPECT_NE(std::string(lastErrorMessage()).find("contributed 16 bytes"), std::string::npos);
  t.join();
  // Tags with separators or shared prefixes stay distinct, and recv consumes the message.
  ASSERT_EQ(a.send(1, "x/1", {1}), ncclSuccess);
  ASSERT_EQ(a.send(1, "x", {2}), ncclSuccess);
  ASSERT_EQ(b.recv(0, "x", &out, waitBoundAfter(100)), ncclSuccess);
  EXPECT_EQ(out, std::vector<uint8_t>{2});
  ASSERT_EQ(b.recv(0, "x/1", &out, waitBoundAfter(100)), ncclSuccess);
  EXPECT_EQ(out, std::vector<uint8_t>{1});
  EXPECT_EQ(store->size(), 2u);  // only the two allGather contributions remain
}

// The process serving the store exits with _exit() the moment its rank has left
// the final barrier. The remote rank may still be waiting for the barrier's
// answer (serving rank last) or about to ask for it (serving rank first); the
// store must linger for it either way.
void servingProcessExitsRightAfterBarrier(bool servingRankFirst) {
  for (int round = 0; round < 3; ++round) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t server = forkChild([&] {
      close(fds[0]);
      ncclUniqueId id;
      CHILD_CHECK(createUniqueIdFrom("", "", "lo", &id) == ncclSuccess);
      CHILD_CHECK(write(fds[1], &id, sizeof(id)) == static_cast<ssize_t>(sizeof(id)));
      {
        std::shared_ptr<Store> s;
        CHILD_CHECK(connectStore(id, 0, waitBoundAfter(5000), &s) == ncclSuccess);
        Bootstrap b(s, "exit/", 0, 2);
        CHILD_CHECK(exercise(b).empty());
        if (!servingRankFirst) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        CHILD_CHECK(b.barrier(waitBoundAfter(5000)) == ncclSuccess);
      }  // the last in-process user leaves: this is where the store lingers
      return 0;
    });
    close(fds[1]);
    ncclUniqueId id;
    ASSERT_EQ(read(fds[0], &id, sizeof(id)), static_cast<ssize_t>(sizeof(id)));
    close(fds[0]);
    {
      std::shared_ptr<Store> s;
      ASSERT_EQ(connectStore(id, 1, waitBoundAfter(5000), &s), ncclSuccess);
      Bootstrap b(std::move(s), "exit/", 1, 2);
      EXPECT_EQ(exercise(b), "");
      if (servingRankFirst) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      EXPECT_EQ(b.barrier(waitBoundAfter(5000)), ncclSuccess) << lastErrorMessage();
    }  // disconnecting releases the lingering server
    auto t0 = Clock::now();
    EXPECT_EQ(waitChild(server), 0);
    EXPECT_LT(msSince(t0), 1000);  // it left as soon as we disconnected
  }
}

TEST(BootstrapCollectives, ServingProcessExitsRightAfterArrivingFirst) { servingProcessExitsRightAfterBarrier(true); }
TEST(BootstrapCollectives, ServingProcessExitsRightAfterArrivingLast) { servingProcessExitsRightAfterBarrier(false); }

// NCCL_COMM_ID is read from the environment, so this runs in a forked child
// (setenv in a threaded test process would race with other tests' getenv).
TEST(BootstrapCollectives, CommIdModeRankZeroServes) {
  uint16_t port = freeLoopbackPort();
  pid_t child = forkChild([&] {
    std::string commId = "127.0.0.1:" + std::to_string(port);
    setenv("NCCL_COMM_ID", commId.c_str(), 1);
    unsetenv("CHORUS_COMM_SECRET");
    ncclUniqueId a, b;
    CHILD_CHECK(createUniqueId(&a) == ncclSuccess && createUniqueId(&b) == ncclSuccess);
    CHILD_CHECK(memcmp(&a, &b, sizeof(a)) == 0);
    CHILD_CHECK(describeUniqueId(a) == commId);
    constexpr int kRanks = 3;
    // Ranks 1 and 2 live in another process and start first: they must retry
    // until rank 0 serves.
    pid_t others = forkChild([&] {
      ncclUniqueId mine;
      CHILD_CHECK(createUniqueId(&mine) == ncclSuccess && memcmp(&mine, &a, sizeof(a)) == 0);
      std::vector<std::string> errs(kRanks);
      std::vector<std::thread> ts;
      for (int r = 1; r < kRanks; ++r)
        ts.emplace_back([&, r] {
          std::shared_ptr<Store> s;
          if (connectStore(mine, r, waitBoundAfter(5000), &s) != ncclSuccess) {
            errs[r] = lastErrorMessage();
            return;
          }
          Bootstrap boot(s, "cid/", r, kRanks);
          errs[r] = exercise(boot);
        });
      for (auto& t : ts) t.join();
      for (int r = 1; r < kRanks; ++r)
        if (!errs[r].empty()) fprintf(stderr, "rank %d: %s\n", r, errs[r].c_str());
      CHILD_CHECK(errs[1].empty() && errs[2].empty());
      return 0;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    std::shared_ptr<Store> s;
    CHILD_CHECK(connectStore(a, 0, waitBoundAfter(5000), &s) == ncclSuccess);
    Bootstrap boot(s, "cid/", 0, kRanks);
    std::string err = exercise(boot);
    if (!err.empty()) fprintf(stderr, "rank 0: %s\n", err.c_str());
    CHILD_CHECK(err.empty());
    CHILD_CHECK(waitChild(others) == 0);
    // A job with another secret at the same address is turned away.
    std::shared_ptr<Store> intruder;
    UniqueIdInfo info;
    CHILD_CHECK(decodeUniqueId(a, &info) == ncclSuccess);
    CHILD_CHECK(connectTcpStore(info.addr, deriveSecret(commId, "other"), 1, waitBoundAfter(2000), &intruder) ==
                ncclRemoteError);
    return 0;
  });
  EXPECT_EQ(waitChild(child), 0);
}

}  // namespace
}  // namespace chorus
