// Ranks that make different calls (docs/reliability.md, "Operation
// fingerprints"): every rank involved gets ncclInvalidUsage within 1 s, with
// a message naming both calls, and the communicator stays failed (the next
// call fails fast). Never a hang, never success with different data.
//
// Most scenarios first run the collectives they mix once, correctly, so the
// connectors exist on every rank; the mismatched call is then op #3 (op #1
// and #2 being the warm-up), or send #2 for point-to-point. The FirstCall
// ones mismatch on the communicator's first call, while connections are
// still being set up (found by the setup notes, plan/setup_notes.h).
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.h"
#include "common/rank_runner.h"

namespace chorus::test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kBoundMs = 1000;

struct Buffers {
  std::vector<float> send = std::vector<float>(4096, 1.0f);
  std::vector<float> recv = std::vector<float>(4096 * 3, 0.0f);
};

using Call = std::function<ncclResult_t(RankCtx&, Buffers&)>;

ncclResult_t allReduce(RankCtx& ctx, Buffers& b, size_t count, ncclDataType_t t, ncclRedOp_t op) {
  return ncclAllReduce(b.send.data(), b.recv.data(), count, t, op, ctx.comm, nullptr);
}

ncclResult_t broadcast(RankCtx& ctx, Buffers& b, size_t count, int root) {
  return ncclBroadcast(b.send.data(), b.recv.data(), count, ncclFloat32, root, ctx.comm, nullptr);
}

// Runs `warmup` (must succeed), then `mismatched`, which must fail with
// ncclInvalidUsage within kBoundMs and a message holding every needle; then
// a further call must fail at once.
void expectMismatch(RankCtx& ctx, const Call& warmup, const Call& mismatched, const std::vector<std::string>& needles) {
  Buffers b;
  if (warmup && !RANK_OK(ctx, warmup(ctx, b))) return;
  const auto t0 = Clock::now();
  const ncclResult_t res = mismatched(ctx, b);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  const std::string msg = ncclGetLastError(nullptr);
  if (res != ncclInvalidUsage)
    ctx.fail("rank %d: mismatched call returned %s, expected ncclInvalidUsage (%s)", ctx.rank, ncclGetErrorString(res),
             msg.c_str());
  if (ms > kBoundMs)
    ctx.fail("rank %d: the mismatch took %lld ms to report (bound %lld)", ctx.rank, (long long)ms, (long long)kBoundMs);
  for (const std::string& n : needles)
    if (msg.find(n) == std::string::npos)
      ctx.fail("rank %d: the error \"%s\" does not mention \"%s\"", ctx.rank, msg.c_str(), n.c_str());
  const auto t1 = Clock::now();
  const ncclResult_t again = allReduce(ctx, b, 16, ncclFloat32, ncclSum);
  const auto againMs = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t1).count();
  if (again == ncclSuccess || againMs > kBoundMs)
    ctx.fail("rank %d: the call after the mismatch returned %s after %lld ms; the comm must stay failed", ctx.rank,
             ncclGetErrorString(again), (long long)againMs);
}

RunOptions quick() {
  RunOptions o;
  o.timeoutMs = 30000;  // a hang fails the test instead of eating the CI budget
  return o;
}

// Both launch modes, 2 ranks.
void onThreadsAndProcesses(int nranks, const RankFn& fn) {
  runThreads(nranks, fn, quick());
  runProcesses(nranks, fn, quick());
}

Call twice(Call a, Call b) {
  return [=](RankCtx& ctx, Buffers& buf) {
    const ncclResult_t r = a(ctx, buf);
    return r != ncclSuccess ? r : b(ctx, buf);
  };
}

Call allReduceCall(size_t count, ncclDataType_t t, ncclRedOp_t op) {
  return [=](RankCtx& ctx, Buffers& b) { return allReduce(ctx, b, count, t, op); };
}

Call broadcastCall(size_t count, int root) {
  return [=](RankCtx& ctx, Buffers& b) { return broadcast(ctx, b, count, root); };
}

Call gatherCall(size_t count, int root) {
  return [=](RankCtx& ctx, Buffers& b) {
    return ncclGather(b.send.data(), b.recv.data(), count, ncclFloat32, root, ctx.comm, nullptr);
  };
}

Call scatterCall(size_t count, int root) {
  return [=](RankCtx& ctx, Buffers& b) {
    return ncclScatter(b.send.data(), b.recv.data(), count, ncclFloat32, root, ctx.comm, nullptr);
  };
}

Call sendCall(size_t count, int peer) {
  return [=](RankCtx& ctx, Buffers& b) { return ncclSend(b.send.data(), count, ncclFloat32, peer, ctx.comm, nullptr); };
}

TEST(OpMismatch, FloatVersusInt32OfTheSameSize) {
  onThreadsAndProcesses(2, [](RankCtx& ctx) {
    const Call warm = twice(allReduceCall(1000, ncclFloat32, ncclSum), allReduceCall(1000, ncclInt32, ncclSum));
    expectMismatch(ctx, warm, allReduceCall(1000, ctx.rank == 0 ? ncclFloat32 : ncclInt32, ncclSum),
                   {"op #3: rank ", "AllReduce(1000 x float, sum)", "AllReduce(1000 x int32, sum)"});
  });
}

TEST(OpMismatch, SumVersusMax) {
  onThreadsAndProcesses(2, [](RankCtx& ctx) {
    const Call warm = twice(allReduceCall(1000, ncclFloat32, ncclSum), allReduceCall(1000, ncclFloat32, ncclMax));
    expectMismatch(ctx, warm, allReduceCall(1000, ncclFloat32, ctx.rank == 0 ? ncclSum : ncclMax),
                   {"op #3", "AllReduce(1000 x float, sum)", "AllReduce(1000 x float, max)"});
  });
}

// A float average runs as a pre-multiplied sum (as in NCCL), yet it is still
// told apart from a plain sum, and named "avg".
TEST(OpMismatch, AverageVersusSum) {
  onThreadsAndProcesses(2, [](RankCtx& ctx) {
    const Call warm = twice(allReduceCall(1000, ncclFloat32, ncclSum), allReduceCall(1000, ncclFloat32, ncclAvg));
    expectMismatch(ctx, warm, allReduceCall(1000, ncclFloat32, ctx.rank == 0 ? ncclSum : ncclAvg),
                   {"op #3", "AllReduce(1000 x float, sum)", "AllReduce(1000 x float, avg)"});
  });
}

Call wireCall(chorusWire_t wire) {
  return [=](RankCtx& ctx, Buffers& b) {
    chorusReduceConfig_t config = CHORUS_REDUCE_CONFIG_INIT;
    config.wire = wire;
    return chorusAllReduceEx(b.send.data(), b.recv.data(), 1000, ncclFloat32, ncclSum, &config, ctx.comm, nullptr);
  };
}

// The two encodings have the same slot sizes: only the fingerprint tells them apart.
TEST(OpMismatch, Int8VersusFp8Wire) {
  onThreadsAndProcesses(2, [](RankCtx& ctx) {
    const Call warm = twice(wireCall(chorusWireInt8), wireCall(chorusWireFloat8e4m3));
    expectMismatch(ctx, warm, wireCall(ctx.rank == 0 ? chorusWireInt8 : chorusWireFloat8e4m3),
                   {"op #3", "AllReduce(1000 x float, sum, int8 wire)", "AllReduce(1000 x float, sum, fp8 wire)"});
  });
}

TEST(OpMismatch, Count1000Versus2000) {
  onThreadsAndProcesses(2, [](RankCtx& ctx) {
    const Call warm = twice(allReduceCall(1000, ncclFloat32, ncclSum), allReduceCall(2000, ncclFloat32, ncclSum));
    expectMismatch(
        ctx, warm, allReduceCall(ctx.rank == 0 ? 1000 : 2000, ncclFloat32, ncclSum),
        {"op #3", "rank 0 called AllReduce(1000 x float, sum)", "rank 1 called AllReduce(2000 x float, sum)"});
  });
}

TEST(OpMismatch, AllReduceVersusBroadcast) {
  onThreadsAndProcesses(2, [](RankCtx& ctx) {
    const Call warm = twice(allReduceCall(1000, ncclFloat32, ncclSum), broadcastCall(1000, 0));
    const Call call = ctx.rank == 0 ? allReduceCall(1000, ncclFloat32, ncclSum) : broadcastCall(1000, 0);
    expectMismatch(
        ctx, warm, call,
        {"op #3", "rank 0 called AllReduce(1000 x float, sum)", "rank 1 called Broadcast(1000 x float, root 0)"});
  });
}

TEST(OpMismatch, BroadcastWithDifferentRoots) {
  onThreadsAndProcesses(2, [](RankCtx& ctx) {
    const Call warm = twice(broadcastCall(1000, 0), broadcastCall(1000, 1));
    expectMismatch(
        ctx, warm, broadcastCall(1000, ctx.rank),
        {"op #3", "rank 0 called Broadcast(1000 x float, root 0)", "rank 1 called Broadcast(1000 x float, root 1)"});
  });
}

TEST(OpMismatch, SendRecvCounts) {
  onThreadsAndProcesses(2, [](RankCtx& ctx) {
    auto p2p = [](size_t sendCount, size_t recvCount) {
      return [=](RankCtx& c, Buffers& b) {
        return c.rank == 0 ? ncclSend(b.send.data(), sendCount, ncclFloat32, 1, c.comm, nullptr)
                           : ncclRecv(b.recv.data(), recvCount, ncclFloat32, 0, c.comm, nullptr);
      };
    };
    expectMismatch(
        ctx, p2p(1000, 1000), p2p(1000, 2000),
        {"send #2 from rank 0 to rank 1", "rank 0 called Send(1000 x float)", "rank 1 called Recv(2000 x float)"});
  });
}

// Three ranks, broadcast roots 0, 0, 2: the root's child takes the root's
// data and forwards it, so the root and its child must not succeed while
// rank 2 fails (each waits for its receivers to complete, FifoControl::doneSeq).
TEST(OpMismatch, ThreeRanksBroadcastWithDifferentRoots) {
  onThreadsAndProcesses(3, [](RankCtx& ctx) {
    const Call warm = twice(broadcastCall(1000, 0), broadcastCall(1000, 2));
    expectMismatch(ctx, warm, broadcastCall(1000, ctx.rank == 2 ? 2 : 0),
                   {"op #3", "Broadcast(1000 x float, root 0)", "Broadcast(1000 x float, root 2)"});
  });
}

TEST(OpMismatch, FirstCallAllReduceVersusBroadcast) {
  onThreadsAndProcesses(2, [](RankCtx& ctx) {
    const Call call = ctx.rank == 0 ? allReduceCall(1000, ncclFloat32, ncclSum) : broadcastCall(1000, 0);
    expectMismatch(ctx, nullptr, call, {"op #1", "AllReduce(1000 x float, sum)", "Broadcast(1000 x float, root 0)"});
  });
}

// One thread drives both ranks (ncclCommInitAll, one group): rank 0's
// AllReduce waits in setup for a connector rank 1's Broadcast never makes,
// and rank 1, whose plan waits for nothing, never waits itself. The watch of
// rank 1's plan, polled while rank 0 waits, reads rank 0's note. A hang
// before (the time limit below turns one into a failure).
TEST(OpMismatch, FirstCallAllReduceVersusBroadcastFromOneThread) {
  ScopedEnv env({{"CHORUS_TIMEOUT_MS", "10000"}, {"CHORUS_MODE", "host"}});
  ncclComm_t comms[2] = {};
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<float> send(1000, 1.0f), recv0(1000), recv1(1000);
  const auto t0 = Clock::now();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(send.data(), recv0.data(), 1000, ncclFloat32, ncclSum, comms[0], nullptr), ncclSuccess);
  EXPECT_EQ(ncclBroadcast(send.data(), recv1.data(), 1000, ncclFloat32, 0, comms[1], nullptr), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage) << ncclGetLastError(nullptr);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  EXPECT_LE(ms, kBoundMs);
  for (ncclComm_t c : comms) {
    ncclResult_t state = ncclSuccess;
    ASSERT_EQ(ncclCommGetAsyncError(c, &state), ncclSuccess);
    EXPECT_EQ(state, ncclInvalidUsage);
    const std::string msg = ncclGetLastError(c);
    for (const char* n : {"op #1", "AllReduce(1000 x float, sum)", "Broadcast(1000 x float, root 0)"})
      EXPECT_NE(msg.find(n), std::string::npos) << "\"" << msg << "\" does not mention " << n;
  }
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommAbort(c), ncclSuccess);
}

// Both ranks send to each other outside a group as their first call: each
// waits for the other's receiver, which neither creates. A deadlock, not a
// wait for a late peer: reported like a mismatch.
TEST(OpMismatch, FirstCallCrossedSends) {
  onThreadsAndProcesses(2, [](RankCtx& ctx) {
    const Call send = [](RankCtx& c, Buffers& b) {
      return ncclSend(b.send.data(), 1000, ncclFloat32, 1 - c.rank, c.comm, nullptr);
    };
    expectMismatch(ctx, nullptr, send, {"send #1 from rank 0 to rank 1", "send #1 from rank 1 to rank 0"});
  });
}

// Rank 2 skips op #3 (an AllReduce of 1000) and calls op #4 (of 2000): the
// ranks next to it find out first, the third from them; all name op #3 and
// rank 2's call.
TEST(OpMismatch, ThreeRanksOneSkipsAnOperation) {
  onThreadsAndProcesses(3, [](RankCtx& ctx) {
    const Call warm = twice(allReduceCall(1000, ncclFloat32, ncclSum), allReduceCall(2000, ncclFloat32, ncclSum));
    expectMismatch(ctx, warm, allReduceCall(ctx.rank == 2 ? 2000 : 1000, ncclFloat32, ncclSum),
                   {"op #3", "rank 2 called AllReduce(2000 x float, sum)", "AllReduce(1000 x float, sum)"});
  });
}

// Rank 1 skips the communicator's first call (an AllReduce) and receives
// rank 0's next call, a Send: rank 0 waits in the AllReduce for rank 1,
// which waits in its Recv for a Send rank 0 makes only after the AllReduce.
// The operation numbers differ (collective #1, receive #1), and neither call
// can return: reported as a mismatch naming both.
TEST(OpMismatch, FirstCallSkippedAllReduceBeforeSend) {
  onThreadsAndProcesses(2, [](RankCtx& ctx) {
    const Call recv = [](RankCtx& c, Buffers& b) {
      return ncclRecv(b.recv.data(), 1000, ncclFloat32, 0, c.comm, nullptr);
    };
    expectMismatch(
        ctx, nullptr, ctx.rank == 0 ? allReduceCall(1000, ncclFloat32, ncclSum) : recv,
        {"rank 0 called ", "AllReduce(1000 x float, sum)", "send #1 from rank 0 to rank 1", "Recv(1000 x float)"});
  });
}

// The same skip after a warm-up made every connector both calls use: rank
// 0 waits in AllReduce #2 over the direct connectors, rank 1 in Recv #2 over
// the point-to-point ones, and no slot flows. Each call, once idle, tells
// the other what it waits in (a setup note), and the two are found blocked
// on each other.
TEST(OpMismatch, SkippedAllReduceBeforeSendOverExistingConnectors) {
  onThreadsAndProcesses(2, [](RankCtx& ctx) {
    const Call p2p = [](RankCtx& c, Buffers& b) {
      return c.rank == 0 ? ncclSend(b.send.data(), 1000, ncclFloat32, 1, c.comm, nullptr)
                         : ncclRecv(b.recv.data(), 1000, ncclFloat32, 0, c.comm, nullptr);
    };
    const Call recv = [](RankCtx& c, Buffers& b) {
      return ncclRecv(b.recv.data(), 1000, ncclFloat32, 0, c.comm, nullptr);
    };
    expectMismatch(ctx, twice(allReduceCall(1000, ncclFloat32, ncclSum), p2p),
                   ctx.rank == 0 ? allReduceCall(1000, ncclFloat32, ncclSum) : recv,
                   {"AllReduce(1000 x float, sum)", "send #2 from rank 0 to rank 1", "Recv(1000 x float)"});
  });
}

// Rank 2 skips op #3 (an AllReduce its neighbours run over connectors they
// already have) and calls its next call, a first Send to rank 0: rank 2
// waits in setup for a receiver rank 0 makes only after op #3.
TEST(OpMismatch, ThreeRanksOneSkipsAnAllReduceAndSends) {
  onThreadsAndProcesses(3, [](RankCtx& ctx) {
    const Call warm = twice(allReduceCall(1000, ncclFloat32, ncclSum), allReduceCall(1000, ncclFloat32, ncclSum));
    expectMismatch(ctx, warm, ctx.rank == 2 ? sendCall(1000, 0) : allReduceCall(1000, ncclFloat32, ncclSum),
                   {"AllReduce(1000 x float, sum)", "send #1 from rank 2 to rank 0", "Send(1000 x float)"});
  });
}

// Rank 0, 1 and 2 each send to the next as their first call, and nobody
// receives: each waits in connection setup for a receiver that is never
// made. The chain of setup notes closes the cycle (plan/setup_notes.cc).
TEST(OpMismatch, FirstCallCycleOfThreeSends) {
  onThreadsAndProcesses(3, [](RankCtx& ctx) {
    expectMismatch(ctx, nullptr, sendCall(1000, (ctx.rank + 1) % 3),
                   {"send #1 from rank ", "called Send(1000 x float)", "called send #1 from rank "});
  });
}

// The same chain of sends, but its last rank calls 3 s late and then
// receives: a late peer, not a cycle, so every call succeeds.
void lateRankInAChainOfSends(RankCtx& ctx) {
  const int next = (ctx.rank + 1) % 3, prev = (ctx.rank + 2) % 3;
  std::vector<float> out(1000, static_cast<float>(ctx.rank + 1)), in(1000, 0.0f);
  if (ctx.rank == 2) {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    if (!RANK_OK(ctx, ncclRecv(in.data(), in.size(), ncclFloat32, prev, ctx.comm, nullptr))) return;
    if (!RANK_OK(ctx, ncclSend(out.data(), out.size(), ncclFloat32, next, ctx.comm, nullptr))) return;
  } else {
    if (!RANK_OK(ctx, ncclSend(out.data(), out.size(), ncclFloat32, next, ctx.comm, nullptr))) return;
    if (!RANK_OK(ctx, ncclRecv(in.data(), in.size(), ncclFloat32, prev, ctx.comm, nullptr))) return;
  }
  if (in[0] != static_cast<float>(prev + 1) || in[999] != static_cast<float>(prev + 1))
    ctx.fail("rank %d: received %g from rank %d, expected %d", ctx.rank, in[0], prev, prev + 1);
}

TEST(SetupNotes, LateRankInAChainOfSendsThreads) { runThreads(3, lateRankInAChainOfSends, quick()); }
TEST(SetupNotes, LateRankInAChainOfSendsProcesses) { runProcesses(3, lateRankInAChainOfSends, quick()); }

// Rank 0 calls an AllReduce and then a Send, rank 1 the same AllReduce and
// the matching Recv, 1 s late: rank 0's setup notes (counters included)
// reach rank 1 before it calls, and must not make a late rank an error.
void lateRankBeforeAnAllReduceAndASend(RankCtx& ctx) {
  std::vector<float> out(1000, static_cast<float>(ctx.rank + 1)), sum(1000, 0.0f), in(1000, 0.0f);
  if (ctx.rank == 1) std::this_thread::sleep_for(std::chrono::seconds(1));
  if (!RANK_OK(ctx, ncclAllReduce(out.data(), sum.data(), out.size(), ncclFloat32, ncclSum, ctx.comm, nullptr))) return;
  if (ctx.rank == 0 && !RANK_OK(ctx, ncclSend(out.data(), out.size(), ncclFloat32, 1, ctx.comm, nullptr))) return;
  if (ctx.rank == 1 && !RANK_OK(ctx, ncclRecv(in.data(), in.size(), ncclFloat32, 0, ctx.comm, nullptr))) return;
  if (sum[0] != 3.0f || sum[999] != 3.0f) ctx.fail("rank %d: the all-reduce gave %g, expected 3", ctx.rank, sum[0]);
  if (ctx.rank == 1 && (in[0] != 1.0f || in[999] != 1.0f))
    ctx.fail("rank 1: received %g from rank 0, expected 1", in[0]);
}

TEST(SetupNotes, LateRankBeforeAnAllReduceAndASendThreads) {
  runThreads(2, lateRankBeforeAnAllReduceAndASend, quick());
}
TEST(SetupNotes, LateRankBeforeAnAllReduceAndASendProcesses) {
  runProcesses(2, lateRankBeforeAnAllReduceAndASend, quick());
}

// Every rank receives from the previous one before it sends to the next,
// outside a group: the classic ring deadlock. No two ranks wait on each
// other directly (rank r waits for r - 1, which waits for r - 2, ...), so
// only the chain of waits the ranks pass on (plan/setup_notes.cc, wait
// chains) finds the cycle. After a warm-up ring exchange (in a group) every
// connector exists and no slot flows; as the first call the receivers wait
// for senders that never connect.
Call ringReceive() {
  return [](RankCtx& c, Buffers& b) {
    return ncclRecv(b.recv.data(), 1000, ncclFloat32, (c.rank + c.nranks - 1) % c.nranks, c.comm, nullptr);
  };
}

Call ringExchange() {
  return [](RankCtx& c, Buffers& b) {
    const int next = (c.rank + 1) % c.nranks, prev = (c.rank + c.nranks - 1) % c.nranks;
    ncclGroupStart();
    ncclSend(b.send.data(), 1000, ncclFloat32, next, c.comm, nullptr);
    ncclRecv(b.recv.data(), 1000, ncclFloat32, prev, c.comm, nullptr);
    return ncclGroupEnd();
  };
}

TEST(OpMismatch, RingOfThreeReceivesAfterWarmUp) {
  onThreadsAndProcesses(3, [](RankCtx& ctx) {
    expectMismatch(ctx, ringExchange(), ringReceive(),
                   {"deadlock: rank ", "called Recv(1000 x float) #2 from rank ", "ncclGroupStart"});
  });
}

TEST(OpMismatch, RingOfFourReceivesAfterWarmUp) {
  onThreadsAndProcesses(4, [](RankCtx& ctx) {
    expectMismatch(ctx, ringExchange(), ringReceive(),
                   {"deadlock: rank ", "called Recv(1000 x float) #2 from rank ", "ncclGroupStart"});
  });
}

TEST(OpMismatch, FirstCallRingOfThreeReceives) {
  onThreadsAndProcesses(3, [](RankCtx& ctx) {
    expectMismatch(ctx, nullptr, ringReceive(), {"deadlock: rank ", "called Recv(1000 x float) #1 from rank "});
  });
}

// The same ring, but its last rank sends before it receives, 1.5 s late:
// a late peer, not a cycle, so every call succeeds (the waits the others
// report meanwhile never close a cycle through it).
void lateRankInARingOfReceives(RankCtx& ctx) {
  const int next = (ctx.rank + 1) % ctx.nranks, prev = (ctx.rank + ctx.nranks - 1) % ctx.nranks;
  std::vector<float> out(1000, static_cast<float>(ctx.rank + 1)), in(1000, 0.0f);
  for (int round = 0; round < 2; ++round) {
    if (ctx.rank == ctx.nranks - 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      if (!RANK_OK(ctx, ncclSend(out.data(), out.size(), ncclFloat32, next, ctx.comm, nullptr))) return;
      if (!RANK_OK(ctx, ncclRecv(in.data(), in.size(), ncclFloat32, prev, ctx.comm, nullptr))) return;
    } else {
      if (!RANK_OK(ctx, ncclRecv(in.data(), in.size(), ncclFloat32, prev, ctx.comm, nullptr))) return;
      if (!RANK_OK(ctx, ncclSend(out.data(), out.size(), ncclFloat32, next, ctx.comm, nullptr))) return;
    }
    if (in[0] != static_cast<float>(prev + 1) || in[999] != static_cast<float>(prev + 1))
      ctx.fail("rank %d: received %g from rank %d, expected %d", ctx.rank, in[0], prev, prev + 1);
  }
}

TEST(WaitChains, LateRankInARingOfReceivesThreads) { runThreads(3, lateRankInARingOfReceives, quick()); }
TEST(WaitChains, LateRankInARingOfReceivesProcesses) { runProcesses(4, lateRankInARingOfReceives, quick()); }

// Gather and scatter (RootedMismatch: completion marks and receivers'
// intents; over network links they travel in acks and on the mark connection).
// Roots 0, 0, 2: two ranks each wait for the other's data and nothing flows
// between them; rank 1's data is taken, but it waits for its root to finish.
TEST(RootedMismatch, ThreeRanksGatherWithDifferentRoots) {
  onThreadsAndProcesses(3, [](RankCtx& ctx) {
    const Call warm = twice(gatherCall(1000, 0), gatherCall(1000, 2));
    expectMismatch(ctx, warm, gatherCall(1000, ctx.rank == 2 ? 2 : 0),
                   {"op #3", "Gather(1000 x float, root 0)", "Gather(1000 x float, root 2)"});
  });
}

// Roots 0, 0, 2: rank 1 receives its part from rank 0 as it should, and must
// still not succeed while ranks 0 and 2 fail.
TEST(RootedMismatch, ThreeRanksScatterWithDifferentRoots) {
  onThreadsAndProcesses(3, [](RankCtx& ctx) {
    const Call warm = twice(scatterCall(1000, 0), scatterCall(1000, 2));
    expectMismatch(ctx, warm, scatterCall(1000, ctx.rank == 2 ? 2 : 0),
                   {"op #3", "Scatter(1000 x float, root 0)", "Scatter(1000 x float, root 2)"});
  });
}

// The same roots as the communicator's first call: the two roots only
// receive, and no connector between them exists yet (each announced a
// receiver the other never connects). Their setup notes tell them apart.
TEST(RootedMismatch, FirstCallGatherWithDifferentRoots) {
  onThreadsAndProcesses(3, [](RankCtx& ctx) {
    expectMismatch(ctx, nullptr, gatherCall(1000, ctx.rank == 2 ? 2 : 0),
                   {"op #1", "Gather(1000 x float, root 0)", "Gather(1000 x float, root 2)"});
  });
}

TEST(RootedMismatch, FirstCallScatterWithDifferentRoots) {
  onThreadsAndProcesses(3, [](RankCtx& ctx) {
    expectMismatch(ctx, nullptr, scatterCall(1000, ctx.rank == 2 ? 2 : 0),
                   {"op #1", "Scatter(1000 x float, root 0)", "Scatter(1000 x float, root 2)"});
  });
}

// Every rank only receives, as its first call.
TEST(RootedMismatch, FirstCallGatherVersusScatter) {
  onThreadsAndProcesses(3, [](RankCtx& ctx) {
    expectMismatch(ctx, nullptr, ctx.rank == 0 ? gatherCall(1000, 0) : scatterCall(1000, 0),
                   {"op #1", "Gather(1000 x float, root 0)", "Scatter(1000 x float, root 0)"});
  });
}

// Rank 0 gathers to itself, ranks 1 and 2 scatter from rank 0: every rank
// waits to receive, nobody sends.
TEST(RootedMismatch, GatherVersusScatter) {
  onThreadsAndProcesses(3, [](RankCtx& ctx) {
    const Call warm = twice(gatherCall(1000, 0), scatterCall(1000, 0));
    expectMismatch(ctx, warm, ctx.rank == 0 ? gatherCall(1000, 0) : scatterCall(1000, 0),
                   {"op #3", "Gather(1000 x float, root 0)", "Scatter(1000 x float, root 0)"});
  });
}

}  // namespace
}  // namespace chorus::test
