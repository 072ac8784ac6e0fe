// Grouped calls: several operations between ncclGroupStart and ncclGroupEnd
// run together at the outermost ncclGroupEnd. Covers several AllReduces on
// one communicator, nested groups (nothing runs before the outermost end),
// mixed collectives, one thread driving every rank of ncclCommInitAll, and
// point-to-point patterns: ring shift, all-pairs, self send/recv, fan-out.
#include <gtest/gtest.h>

#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/coll_cases.h"
#include "common/rank_runner.h"

namespace chorus::test {
namespace {

using Prepared = std::vector<std::unique_ptr<PreparedCase>>;

Case makeCase(Coll coll, ncclDataType_t t, OpKind op, size_t count, bool inPlace = false, int root = 0) {
  Case c;
  c.coll = coll;
  c.type = t;
  c.op = op;
  c.count = count;
  c.inPlace = inPlace;
  c.root = root;
  return c;
}

// Prepares every case, issues them all inside one group, verifies them all.
void runGrouped(RankCtx& ctx, ncclComm_t comm, const std::vector<Case>& cases) {
  Prepared ps;
  for (const Case& c : cases) {
    ps.push_back(std::make_unique<PreparedCase>(ctx, comm, c));
    if (!ps.back()->prepare()) return;
  }
  if (!RANK_OK(ctx, ncclGroupStart())) return;
  for (auto& p : ps) {
    ncclResult_t res = p->issue();
    if (res != ncclSuccess)
      ctx.fail("rank %d: issuing %s in a group returned %s", ctx.rank, collName(p->spec().coll),
               ncclGetErrorString(res));
  }
  if (!RANK_OK(ctx, ncclGroupEnd())) return;
  for (auto& p : ps) p->verify();
}

std::vector<Case> severalAllReduces(int nranks) {
  return {makeCase(Coll::AllReduce, ncclFloat32, OpKind::Sum, 1001),
          makeCase(Coll::AllReduce, ncclInt8, OpKind::Max, 17, true),
          makeCase(Coll::AllReduce, ncclBfloat16, OpKind::Avg, 70001),
          makeCase(Coll::AllReduce, ncclFloat16, OpKind::PreMulDevice, 3),
          makeCase(Coll::AllReduce, ncclUint64, OpKind::Prod, 0),
          makeCase(Coll::AllReduce, ncclDouble, OpKind::Min, 4099, true)};
}

std::vector<Case> mixedCollectives(int nranks) {
  return {makeCase(Coll::AllReduce, ncclFloat32, OpKind::Sum, 1001),
          makeCase(Coll::AllGather, ncclInt32, OpKind::Sum, 333, true),
          makeCase(Coll::Broadcast, ncclFloat16, OpKind::Sum, 5000, false, nranks - 1),
          makeCase(Coll::ReduceScatter, ncclFloat32, OpKind::Max, 77),
          makeCase(Coll::Reduce, ncclInt64, OpKind::Sum, 1001, false, nranks / 2),
          makeCase(Coll::AlltoAll, ncclUint8, OpKind::Sum, 129),
          makeCase(Coll::Gather, ncclBfloat16, OpKind::Sum, 65, false, 0),
          makeCase(Coll::Scatter, ncclFloat64, OpKind::Sum, 65, true, nranks - 1),
          makeCase(Coll::SendRecvRing, ncclFloat32, OpKind::Sum, 2049),
          makeCase(Coll::AllReduce, ncclFloat8e5m2, OpKind::Sum, 9)};
}

class Groups : public ::testing::TestWithParam<int> {};

TEST_P(Groups, SeveralAllReducesOneComm) {
  const int n = GetParam();
  runThreads(n, [&](RankCtx& ctx) { runGrouped(ctx, ctx.comm, severalAllReduces(n)); });
}

TEST_P(Groups, MixedCollectives) {
  const int n = GetParam();
  runThreads(n, [&](RankCtx& ctx) { runGrouped(ctx, ctx.comm, mixedCollectives(n)); });
}

TEST_P(Groups, NestedGroupsRunAtOutermostEnd) {
  const int n = GetParam();
  runThreads(n, [&](RankCtx& ctx) {
    PreparedCase a(ctx, ctx.comm, makeCase(Coll::AllReduce, ncclFloat32, OpKind::Sum, 1001));
    PreparedCase b(ctx, ctx.comm, makeCase(Coll::AllGather, ncclInt32, OpKind::Sum, 100));
    if (!a.prepare() || !b.prepare()) return;
    RANK_OK(ctx, ncclGroupStart());
    RANK_OK(ctx, ncclGroupStart());
    RANK_OK(ctx, a.issue());
    RANK_OK(ctx, ncclGroupEnd());
    // Still inside the outer group: the AllReduce must not have run yet.
    if (!a.recvStillPoisoned()) ctx.fail("rank %d: an inner ncclGroupEnd ran the operation early", ctx.rank);
    RANK_OK(ctx, ncclGroupStart());
    RANK_OK(ctx, b.issue());
    RANK_OK(ctx, ncclGroupEnd());
    RANK_OK(ctx, ncclGroupEnd());
    a.verify();
    b.verify();
  });
}

TEST_P(Groups, ProcessesMixedCollectives) {
  const int n = GetParam();
  if (n > 4) GTEST_SKIP() << "forked variant runs at small rank counts only";
  runProcesses(n, [&](RankCtx& ctx) { runGrouped(ctx, ctx.comm, mixedCollectives(n)); });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Groups, ::testing::Values(1, 2, 3, 4, 7));

// One thread drives every rank: with ncclCommInitAll communicators, a group
// per "round" holds one call per rank.
TEST(GroupsInitAll, OneOpPerCommFromOneThread) {
  for (int n : {1, 2, 4, 5}) {
    runInitAll(n, [&](RankCtx& ctx, std::vector<ncclComm_t>& comms) {
      for (int r = 0; r < n; ++r) {
        int rank = -1, count = -1;
        RANK_OK(ctx, ncclCommUserRank(comms[r], &rank));
        RANK_OK(ctx, ncclCommCount(comms[r], &count));
        if (rank != r || count != n) ctx.fail("InitAll comm %d reports rank %d of %d", r, rank, count);
      }
      for (const Case& c : mixedCollectives(n)) {
        Prepared ps;
        for (int r = 0; r < n; ++r) {
          ps.push_back(std::make_unique<PreparedCase>(ctx, comms[r], c));
          if (!ps.back()->prepare()) return;
        }
        RANK_OK(ctx, ncclGroupStart());
        for (auto& p : ps) RANK_OK(ctx, p->issue());
        if (!RANK_OK(ctx, ncclGroupEnd())) return;
        for (auto& p : ps) p->verify();
      }
    });
  }
}

// Destroying or aborting a communicator inside the group that queued calls
// on it drops them (they would run on a freed communicator), and
// ncclGroupEnd says so and runs nothing.
TEST(GroupsInitAll, DestroyOrAbortInsideTheGroupDropsTheCallsQueuedOnIt) {
  for (const char* fn : {"ncclCommDestroy", "ncclCommAbort"}) {
    runInitAll(2, [&](RankCtx& ctx, std::vector<ncclComm_t>& comms) {
      std::vector<float> in(64, 1.0f), out0(64, 0.0f), out1(64, 0.0f);
      RANK_OK(ctx, ncclGroupStart());
      RANK_OK(ctx, ncclAllReduce(in.data(), out0.data(), 64, ncclFloat32, ncclSum, comms[0], nullptr));
      RANK_OK(ctx, ncclAllReduce(in.data(), out1.data(), 64, ncclFloat32, ncclSum, comms[1], nullptr));
      const bool destroy = std::string(fn) == "ncclCommDestroy";
      RANK_OK(ctx, destroy ? ncclCommDestroy(comms[0]) : ncclCommAbort(comms[0]));
      comms[0] = nullptr;
      const ncclResult_t end = ncclGroupEnd();
      const std::string why = ncclGetLastError(nullptr);
      if (end != ncclInvalidUsage) ctx.fail("%s in a group: ncclGroupEnd returned %s", fn, ncclGetErrorString(end));
      if (why.find(std::string(fn) + " was called on communicator") == std::string::npos ||
          why.find("1 call(s) queued on it; they were dropped") == std::string::npos)
        ctx.fail("%s in a group: ncclGroupEnd says: %s", fn, why.c_str());
      if (out1[0] != 0.0f) ctx.fail("%s in a group: the other communicator's call ran", fn);
    });
  }
}

// A split queued in the group runs on its parent: destroying the parent
// first drops it.
TEST(GroupsInitAll, DestroyingTheParentOfAQueuedSplitDropsTheSplit) {
  runInitAll(2, [&](RankCtx& ctx, std::vector<ncclComm_t>& comms) {
    ncclComm_t child = nullptr;
    RANK_OK(ctx, ncclGroupStart());
    RANK_OK(ctx, ncclCommSplit(comms[0], 0, 0, &child, nullptr));
    RANK_OK(ctx, ncclCommDestroy(comms[0]));
    comms[0] = nullptr;
    const ncclResult_t end = ncclGroupEnd();
    if (end != ncclInvalidUsage) ctx.fail("ncclGroupEnd returned %s", ncclGetErrorString(end));
    if (child != nullptr) ctx.fail("the dropped split made a communicator");
  });
}

// Destroy finalizes by itself: a finalize queued before it in the same group
// is dropped without an error.
TEST(GroupsInitAll, FinalizeThenDestroyInOneGroupSucceeds) {
  runInitAll(1, [&](RankCtx& ctx, std::vector<ncclComm_t>& comms) {
    RANK_OK(ctx, ncclGroupStart());
    RANK_OK(ctx, ncclCommFinalize(comms[0]));
    RANK_OK(ctx, ncclCommDestroy(comms[0]));
    comms[0] = nullptr;
    RANK_OK(ctx, ncclGroupEnd());
  });
}

// Another thread destroys a communicator this thread's open group holds a
// call on: ncclGroupEnd refuses to run on the freed communicator.
TEST(GroupsInitAll, AGroupWhoseCommunicatorAnotherThreadDestroyedRunsNothing) {
  runInitAll(1, [&](RankCtx& ctx, std::vector<ncclComm_t>& comms) {
    std::vector<float> buf(16, 1.0f);
    std::latch queued(1), destroyed(1);
    ncclResult_t end = ncclSuccess;
    std::string why;
    std::thread owner([&] {
      RANK_OK(ctx, ncclGroupStart());
      RANK_OK(ctx, ncclAllReduce(buf.data(), buf.data(), 16, ncclFloat32, ncclSum, comms[0], nullptr));
      queued.count_down();
      destroyed.wait();
      end = ncclGroupEnd();
      why = ncclGetLastError(nullptr);
    });
    queued.wait();
    RANK_OK(ctx, ncclCommDestroy(comms[0]));
    comms[0] = nullptr;
    destroyed.count_down();
    owner.join();
    if (end != ncclInvalidUsage) ctx.fail("ncclGroupEnd returned %s", ncclGetErrorString(end));
    if (why.find("was destroyed or aborted while this group held calls on it") == std::string::npos)
      ctx.fail("ncclGroupEnd says: %s", why.c_str());
  });
}

// A call that fails inside a group fails ncclGroupEnd with its own message,
// even after later calls of the group.
TEST(GroupsInitAll, GroupEndRepeatsTheMessageOfTheCallThatFailed) {
  runInitAll(1, [&](RankCtx& ctx, std::vector<ncclComm_t>& comms) {
    std::vector<float> buf(8, 1.0f);
    RANK_OK(ctx, ncclGroupStart());
    const ncclResult_t bad =
        ncclAllReduce(buf.data(), buf.data(), 8, static_cast<ncclDataType_t>(77), ncclSum, comms[0], nullptr);
    if (bad != ncclInvalidArgument) ctx.fail("datatype 77 returned %s", ncclGetErrorString(bad));
    RANK_OK(ctx, ncclAllReduce(buf.data(), buf.data(), 8, ncclFloat32, ncclSum, comms[0], nullptr));
    const ncclResult_t end = ncclGroupEnd();
    const std::string why = ncclGetLastError(nullptr);
    if (end != ncclInvalidArgument) ctx.fail("ncclGroupEnd returned %s", ncclGetErrorString(end));
    if (why.find("an operation in the group failed earlier: ncclAllReduce: invalid datatype 77") == std::string::npos)
      ctx.fail("ncclGroupEnd says: %s", why.c_str());
  });
}

TEST(GroupsInitAll, SeveralOpsPerCommInOneGroup) {
  const int n = 3;
  runInitAll(n, [&](RankCtx& ctx, std::vector<ncclComm_t>& comms) {
    Prepared ps;
    for (const Case& c : severalAllReduces(n))
      for (int r = 0; r < n; ++r) {
        ps.push_back(std::make_unique<PreparedCase>(ctx, comms[r], c));
        if (!ps.back()->prepare()) return;
      }
    RANK_OK(ctx, ncclGroupStart());
    for (auto& p : ps) RANK_OK(ctx, p->issue());
    if (!RANK_OK(ctx, ncclGroupEnd())) return;
    for (auto& p : ps) p->verify();
  });
}

}  // namespace
}  // namespace chorus::test
