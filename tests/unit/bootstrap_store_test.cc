// MemStore: the in-process store and the watch machinery the TCP server builds on.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "bootstrap/mem_store.h"
#include "core/result.h"
#include "unit/bootstrap_test_util.h"

namespace chorus {
namespace {

using testing::msSince;
using Bytes = std::vector<uint8_t>;

Bytes bytesOf(const std::string& s) { return Bytes(s.begin(), s.end()); }

TEST(BootstrapMemStore, SetThenGetReturnsValuesInKeyOrder) {
  MemStore s;
  ASSERT_EQ(s.set("a", bytesOf("alpha")), ncclSuccess);
  ASSERT_EQ(s.set("b", Bytes{0, 1, 0, 255}), ncclSuccess);
  ASSERT_EQ(s.set("empty", {}), ncclSuccess);
  std::vector<Bytes> v;
  ASSERT_EQ(s.get({"b", "a", "empty", "a"}, &v, waitBoundAfter(1000)), ncclSuccess);
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0], (Bytes{0, 1, 0, 255}));
  EXPECT_EQ(v[1], bytesOf("alpha"));
  EXPECT_TRUE(v[2].empty());
  EXPECT_EQ(v[3], bytesOf("alpha"));
  ASSERT_EQ(s.set("a", bytesOf("again")), ncclSuccess);  // overwrite
  ASSERT_EQ(s.get({"a"}, &v, waitBoundAfter(1000)), ncclSuccess);
  EXPECT_EQ(v[0], bytesOf("again"));
  ASSERT_EQ(s.get({}, &v, waitBoundAfter(0)), ncclSuccess);  // nothing to wait for
  EXPECT_TRUE(v.empty());
}

TEST(BootstrapMemStore, GetBlocksUntilAnotherThreadSets) {
  MemStore s;
  auto t0 = Clock::now();
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    s.set("late", bytesOf("here"));
  });
  std::vector<Bytes> v;
  ASSERT_EQ(s.get({"late"}, &v, waitBoundAfter(5000)), ncclSuccess);
  EXPECT_GE(msSince(t0), 50);
  EXPECT_EQ(v[0], bytesOf("here"));
  setter.join();
  EXPECT_EQ(s.pendingWatches(), 0u);
}

TEST(BootstrapMemStore, OneSetWakesEveryWaiter) {
  MemStore s;
  std::atomic<int> woke{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 16; ++i)
    ts.emplace_back([&] {
      std::vector<Bytes> v;
      if (s.get({"go", "also"}, &v, waitBoundAfter(5000)) == ncclSuccess && v[0] == bytesOf("1")) woke++;
    });
  s.set("also", {});
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(woke.load(), 0);
  s.set("go", bytesOf("1"));
  for (auto& t : ts) t.join();
  EXPECT_EQ(woke.load(), 16);
}

TEST(BootstrapMemStore, AddIsAtomicAndStartsFromZero) {
  MemStore s;
  int64_t r = -1;
  ASSERT_EQ(s.add("ctr", 5, &r), ncclSuccess);
  EXPECT_EQ(r, 5);
  ASSERT_EQ(s.add("ctr", -2, &r), ncclSuccess);
  EXPECT_EQ(r, 3);
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i)
    ts.emplace_back([&] {
      int64_t x = 0;
      for (int k = 0; k < 1000; ++k) s.add("many", 1, &x);
    });
  for (auto& t : ts) t.join();
  std::vector<Bytes> v;
  ASSERT_EQ(s.get({"many"}, &v, waitBoundAfter(100)), ncclSuccess);
  int64_t total = 0;
  ASSERT_TRUE(decodeCounter(v[0], &total));
  EXPECT_EQ(total, 8000);
  // A value that is not a counter is refused, not reinterpreted.
  s.set("text", bytesOf("abc"));
  EXPECT_EQ(s.add("text", 1, &r), ncclInvalidUsage);
  EXPECT_NE(std::string(lastErrorMessage()).find("not a counter"), std::string::npos);
}

TEST(BootstrapMemStore, ErasePrefixRemovesOnlyMatchingKeys) {
  MemStore s;
  for (const char* k : {"c1/a", "c1/b", "c1", "c10/a", "c2/a"}) s.set(k, bytesOf(k));
  ASSERT_EQ(s.erasePrefix("c1/"), ncclSuccess);
  EXPECT_EQ(s.size(), 3u);
  std::vector<Bytes> v;
  ASSERT_EQ(s.get({"c1", "c10/a", "c2/a"}, &v, waitBoundAfter(100)), ncclSuccess);
  EXPECT_EQ(s.get({"c1/a"}, &v, waitBoundAfter(30)), ncclRemoteError);
  ASSERT_EQ(s.erasePrefix(""), ncclSuccess);
  EXPECT_EQ(s.size(), 0u);
}

TEST(BootstrapMemStore, GetTimesOutNamingTheMissingKey) {
  MemStore s("test store");
  s.set("present", {});
  auto t0 = Clock::now();
  std::vector<Bytes> v;
  EXPECT_EQ(s.get({"present", "absent"}, &v, waitBoundAfter(120)), ncclRemoteError);
  auto ms = msSince(t0);
  EXPECT_GE(ms, 110);
  EXPECT_LT(ms, 1000);
  std::string msg = lastErrorMessage();
  EXPECT_NE(msg.find("timed out after"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'absent'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1 of 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("test store"), std::string::npos) << msg;
  EXPECT_EQ(s.pendingWatches(), 0u);  // the timed-out wait left nothing behind
  // The key arriving later does not trip over the cancelled wait.
  s.set("absent", {});
  ASSERT_EQ(s.get({"absent"}, &v, waitBoundAfter(100)), ncclSuccess);
}

TEST(BootstrapMemStore, AbortFlagEndsTheWaitPromptly) {
  MemStore s;
  std::atomic<bool> abort{false};
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(80));
    abort.store(true);
  });
  auto t0 = Clock::now();
  std::vector<Bytes> v;
  EXPECT_EQ(s.get({"never"}, &v, waitBoundAfter(10000, &abort)), ncclRemoteError);
  EXPECT_LT(msSince(t0), 1000);
  EXPECT_NE(std::string(lastErrorMessage()).find("aborted"), std::string::npos);
  aborter.join();
  // Already aborted: returns at once.
  t0 = Clock::now();
  EXPECT_EQ(s.get({"never"}, &v, waitBoundAfter(10000, &abort)), ncclRemoteError);
  EXPECT_LT(msSince(t0), 200);
}

TEST(BootstrapMemStore, WatchFiresOnceAllKeysExistEvenAfterAnErase) {
  MemStore s;
  int fired = 0;
  MemStore::Values got, now;
  uint64_t id = s.watch({"x", "y"}, &now, [&](MemStore::Values v) {
    ++fired;
    got = std::move(v);
  });
  ASSERT_NE(id, 0u);
  s.set("x", bytesOf("1"));
  s.erasePrefix("x");  // x vanishes before y arrives
  s.set("y", bytesOf("2"));
  EXPECT_EQ(fired, 0);
  s.set("x", bytesOf("3"));
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(got, (MemStore::Values{bytesOf("3"), bytesOf("2")}));
  MemStore::Missing m;
  EXPECT_FALSE(s.cancelWatch(id, &m));  // already fired
  // A watch on existing keys completes immediately without a callback.
  EXPECT_EQ(s.watch({"x"}, &now, [&](MemStore::Values) { ++fired; }), 0u);
  EXPECT_EQ(now[0], bytesOf("3"));
  // Cancelling reports what was missing.
  id = s.watch({"x", "q", "r"}, &now, [&](MemStore::Values) { ++fired; });
  ASSERT_TRUE(s.cancelWatch(id, &m));
  EXPECT_EQ(m.count, 2u);
  EXPECT_EQ(m.first, "q");
  s.set("q", {});
  s.set("r", {});
  EXPECT_EQ(fired, 1);
}

}  // namespace
}  // namespace chorus
