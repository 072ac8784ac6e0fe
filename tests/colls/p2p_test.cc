// Point-to-point patterns inside groups: all-pairs exchange, send/recv to
// oneself, fan-out from one rank, several messages to the same peer (matched
// in call order), zero-byte messages, and uneven sizes per peer; and the same
// with registered send buffers (zero-copy between threads, the FIFOs between
// processes), mixed with unregistered ones and after deregistration.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "common/expected_values.h"
#include "common/rank_runner.h"
#include "core/comm.h"
#include "transport/connection_table.h"

namespace chorus::test {
namespace {

// Data rank `from` sends to rank `to` as message `msg`, element i.
uint64_t message(ncclDataType_t t, int from, int to, int msg, size_t i) {
  return payloadBits(t, from, (static_cast<size_t>(to) * 16 + static_cast<size_t>(msg)) * 1000003 + i);
}

struct Transfer {
  int peer;
  int msg;
  size_t count;
  bool registered = false;  // the send buffer is registered with the communicator for the exchange
};

// How exchange() runs and what it checks beyond the data.
struct ExchangeOptions {
  int repeats = 1;  // the same group on the same buffers (the plan is reused)
  // Check the slots each point-to-point connector moved: one per registered
  // message when zeroCopy (a descriptor), else one per slot's worth of data.
  bool checkSlots = false;
  bool zeroCopy = false;
};

// Slots this rank has posted so far on its point-to-point connector to `peer`.
uint64_t slotsPostedTo(RankCtx& ctx, int peer) {
  const SendConnector* c =
      ctx.comm->conns->findSend(ConnKey{ConnClass::P2P, static_cast<uint8_t>(Proto::Simple), 0, peer});
  return c != nullptr && c->end().ctl != nullptr ? c->end().ctl->tail.load() : 0;
}

// The slots `sends` should post to `peer` (see ExchangeOptions).
uint64_t expectedSlots(RankCtx& ctx, const std::vector<Transfer>& sends, int peer, size_t es, bool zeroCopy) {
  const uint64_t slotBytes = ctx.comm->config.slotBytes;
  uint64_t n = 0;
  for (const Transfer& s : sends) {
    if (s.peer != peer || s.count == 0) continue;
    n += zeroCopy && s.registered ? 1 : (s.count * es + slotBytes - 1) / slotBytes;
  }
  return n;
}

// Posts every send and recv of this rank in one group, then checks every
// received message and every guard.
void exchange(RankCtx& ctx, ncclDataType_t t, const std::vector<Transfer>& sends, const std::vector<Transfer>& recvs,
              const ExchangeOptions& opts = {}) {
  const size_t es = typeInfo(t).size;
  std::vector<std::unique_ptr<GuardedBuffer>> sb, rb;
  for (const Transfer& s : sends) {
    sb.push_back(std::make_unique<GuardedBuffer>(s.count * es));
    for (size_t i = 0; i < s.count; ++i) storeElem(sb.back()->data(), i, es, message(t, ctx.rank, s.peer, s.msg, i));
  }
  for (const Transfer& r : recvs) rb.push_back(std::make_unique<GuardedBuffer>(r.count * es));
  std::vector<void*> handles;
  for (size_t k = 0; k < sends.size(); ++k) {
    if (!sends[k].registered || sends[k].count == 0) continue;
    handles.push_back(nullptr);
    if (!RANK_OK(ctx, ncclCommRegister(ctx.comm, sb[k]->data(), sends[k].count * es, &handles.back()))) return;
  }
  for (int rep = 0; rep < opts.repeats; ++rep) {
    std::vector<uint64_t> before;
    for (int p = 0; p < ctx.nranks; ++p) before.push_back(slotsPostedTo(ctx, p));
    for (auto& b : rb) b->poison();
    if (!RANK_OK(ctx, ncclGroupStart())) return;
    for (size_t k = 0; k < sends.size(); ++k)
      RANK_OK(ctx, ncclSend(sb[k]->data(), sends[k].count, t, sends[k].peer, ctx.comm, nullptr));
    for (size_t k = 0; k < recvs.size(); ++k)
      RANK_OK(ctx, ncclRecv(rb[k]->data(), recvs[k].count, t, recvs[k].peer, ctx.comm, nullptr));
    if (!RANK_OK(ctx, ncclGroupEnd())) return;
    for (int p = 0; opts.checkSlots && p < ctx.nranks; ++p) {
      if (p == ctx.rank) continue;  // sends to oneself are local copies
      const uint64_t moved = slotsPostedTo(ctx, p) - before[static_cast<size_t>(p)];
      const uint64_t want = expectedSlots(ctx, sends, p, es, opts.zeroCopy);
      if (moved != want)
        ctx.fail("rank %d: round %d: %llu slots posted to rank %d, expected %llu (%s)", ctx.rank, rep,
                 static_cast<unsigned long long>(moved), p, static_cast<unsigned long long>(want),
                 opts.zeroCopy ? "one descriptor per registered message" : "no zero-copy");
    }
    for (size_t k = 0; k < recvs.size(); ++k) {
      const Transfer& r = recvs[k];
      size_t bad = 0;
      for (size_t i = 0; i < r.count; ++i)
        bad += loadElem(rb[k]->data(), i, es) != message(t, r.peer, ctx.rank, r.msg, i);
      if (bad)
        ctx.fail("rank %d: round %d: message %d from rank %d: %zu of %zu elements wrong", ctx.rank, rep, r.msg, r.peer,
                 bad, r.count);
      std::string damage = rb[k]->guardDamage();
      if (!damage.empty()) ctx.fail("rank %d: recv from %d: %s", ctx.rank, r.peer, damage.c_str());
    }
  }
  for (void* h : handles) RANK_OK(ctx, ncclCommDeregister(ctx.comm, h));
  for (size_t k = 0; k < sends.size(); ++k) {
    size_t bad = 0;
    for (size_t i = 0; i < sends[k].count; ++i)
      bad += loadElem(sb[k]->data(), i, es) != message(t, ctx.rank, sends[k].peer, sends[k].msg, i);
    if (bad) ctx.fail("rank %d: send buffer to %d was modified", ctx.rank, sends[k].peer);
  }
}

// Message sizes differ per (sender, receiver) pair, including empty ones.
size_t pairCount(int from, int to) { return static_cast<size_t>((from * 7 + to * 13) % 5) * 997; }

// Message `msg` to and from every rank (itself included), of
// pairCount * scale + extra elements.
void allPairs(RankCtx& ctx, int n, ncclDataType_t t, int msg, size_t scale, size_t extra, bool registered,
              const ExchangeOptions& opts = {}) {
  std::vector<Transfer> sends, recvs;
  for (int p = 0; p < n; ++p) {
    sends.push_back({p, msg, pairCount(ctx.rank, p) * scale + extra, registered});
    recvs.push_back({p, msg, pairCount(p, ctx.rank) * scale + extra});
  }
  exchange(ctx, t, sends, recvs, opts);
}

// `messages` messages to the next rank and from the previous one, matched
// in call order; message m has count(m) elements and is sent from a
// registered buffer when registered(m).
void ringMessages(RankCtx& ctx, int n, ncclDataType_t t, int messages, const std::function<size_t(int)>& count,
                  const std::function<bool(int)>& registered, const ExchangeOptions& opts = {}) {
  const int next = (ctx.rank + 1) % n, prev = (ctx.rank + n - 1) % n;
  std::vector<Transfer> sends, recvs;
  for (int m = 0; m < messages; ++m) {
    sends.push_back({next, m, count(m), registered(m)});
    recvs.push_back({prev, m, count(m)});
  }
  exchange(ctx, t, sends, recvs, opts);
}

class P2P : public ::testing::TestWithParam<int> {};

TEST_P(P2P, AllPairsIncludingSelf) {
  const int n = GetParam();
  runThreads(n, [&](RankCtx& ctx) {
    for (ncclDataType_t t : {ncclFloat32, ncclInt8, ncclFloat64}) allPairs(ctx, n, t, 0, 1, 0, false);
  });
}

TEST_P(P2P, SelfSendRecv) {
  const int n = GetParam();
  runThreads(n, [&](RankCtx& ctx) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{100003}})
      exchange(ctx, ncclBfloat16, {{ctx.rank, 0, count}}, {{ctx.rank, 0, count}});
  });
}

TEST_P(P2P, FanOutFromRoot) {
  const int n = GetParam();
  runThreads(n, [&](RankCtx& ctx) {
    std::vector<Transfer> sends, recvs;
    if (ctx.rank == 0)
      for (int p = 1; p < n; ++p) sends.push_back({p, 0, 4099});
    else
      recvs.push_back({0, 0, 4099});
    exchange(ctx, ncclUint32, sends, recvs);
  });
}

TEST_P(P2P, SeveralMessagesToOnePeerMatchInOrder) {
  const int n = GetParam();
  runThreads(n, [&](RankCtx& ctx) {
    ringMessages(
        ctx, n, ncclFloat16, 4, [](int m) { return static_cast<size_t>(m) * 40000 + 1; }, [](int) { return false; });
  });
}

TEST_P(P2P, ProcessesAllPairs) {
  const int n = GetParam();
  if (n > 4) GTEST_SKIP() << "forked variant runs at small rank counts only";
  runProcesses(n, [&](RankCtx& ctx) { allPairs(ctx, n, ncclFloat32, 0, 10, 1, false); });
}

// Every send from a registered buffer: between threads the receiver copies
// straight from it, one descriptor slot per message (counted on the
// connectors). Each exchange runs its group twice on the same buffers, so the
// second run reuses the plan with its zero-copy steps; the last round is
// unregistered and must move the data through the FIFO slots again (the
// deregistration changed the registration epoch).
TEST_P(P2P, RegisteredSendBuffersAllPairs) {
  const int n = GetParam();
  runThreads(n, [&](RankCtx& ctx) {
    for (int round = 0; round < 3; ++round) {
      ExchangeOptions opts;
      opts.repeats = 2;
      opts.checkSlots = true;
      opts.zeroCopy = round < 2;
      allPairs(ctx, n, ncclFloat32, round, 40, 1, round < 2, opts);
    }
  });
}

// Registered and unregistered messages to one peer, alternating: the
// zero-copy descriptors and the FIFO pieces share a connector and must still
// match in call order.
TEST_P(P2P, RegisteredAndPlainMessagesToOnePeerMatchInOrder) {
  const int n = GetParam();
  ExchangeOptions opts;
  opts.checkSlots = true;
  opts.zeroCopy = true;
  runThreads(n, [&](RankCtx& ctx) {
    ringMessages(
        ctx, n, ncclInt8, 6, [](int m) { return static_cast<size_t>(m % 3) * 70001 + 3; },
        [](int m) { return m % 2 == 0; }, opts);
  });
}

// NCCL_LOCAL_REGISTER=0: registered buffers go through the FIFOs.
TEST_P(P2P, LocalRegisterOffMeansNoZeroCopy) {
  const int n = GetParam();
  ExchangeOptions opts;
  opts.checkSlots = true;
  opts.zeroCopy = false;
  RunOptions run;
  run.env = {{"NCCL_LOCAL_REGISTER", "0"}};
  runThreads(
      n, [&](RankCtx& ctx) { allPairs(ctx, n, ncclFloat32, 0, 40, 1, true, opts); }, run);
}

// Between processes the receiver cannot read the sender's memory: registered
// buffers go through the shared-memory FIFOs and arrive intact.
TEST_P(P2P, RegisteredSendBuffersBetweenProcesses) {
  const int n = GetParam();
  if (n > 4) GTEST_SKIP() << "forked variant runs at small rank counts only";
  ExchangeOptions opts;
  opts.checkSlots = true;
  opts.zeroCopy = false;
  runProcesses(n, [&](RankCtx& ctx) { allPairs(ctx, n, ncclFloat32, 0, 10, 1, true, opts); });
}

INSTANTIATE_TEST_SUITE_P(Ranks, P2P, ::testing::Values(1, 2, 3, 4, 8));

}  // namespace
}  // namespace chorus::test
