// chorusCommGetStats: the bytes each rank's connectors moved, by link, and
// the calls it completed. A ring all-reduce of N bytes at n ranks (forced
// Ring, Simple protocol) moves every one of its n shards n-1 times in the
// reduce-scatter and n-1 times in the all-gather, so each rank sends and
// receives 2(n-1)N/n bytes when n divides N evenly into the plan's pieces; a
// ring of point-to-point messages moves exactly what was sent. Checked over
// threads (inproc), processes (shm) and processes on sockets (net); every
// other link stays at zero. Compressed all-reduces count their encoded
// bytes. Bad arguments get ncclInvalidArgument.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "chorus/chorus.h"
#include "common/rank_runner.h"

namespace chorus::test {
namespace {

constexpr int kFields = 1 + 2 * chorusLinkCount;  // ops, bytesSent[], bytesRecv[]
using Counters = std::array<uint64_t, kFields>;

bool readStats(RankCtx& ctx, Counters* out) {
  chorusCommStats_t s;
  std::memset(&s, 0, sizeof s);
  s.size = sizeof s;
  if (!RANK_OK(ctx, chorusCommGetStats(ctx.comm, &s))) return false;
  (*out)[0] = s.ops;
  for (int k = 0; k < chorusLinkCount; ++k) {
    (*out)[1 + k] = s.bytesSent[k];
    (*out)[1 + chorusLinkCount + k] = s.bytesRecv[k];
  }
  return true;
}

// What `body` added to this rank's counters, then every rank's deltas
// (gathered after the second reading, so the gather itself is not counted).
bool deltasOfAllRanks(RankCtx& ctx, const std::function<bool()>& body, std::vector<Counters>* all) {
  Counters before{}, after{}, delta{};
  if (!readStats(ctx, &before) || !body() || !readStats(ctx, &after)) return false;
  for (int i = 0; i < kFields; ++i) delta[i] = after[i] - before[i];
  all->assign(ctx.nranks, Counters{});
  return RANK_OK(ctx, ncclAllGather(delta.data(), all->data(), kFields, ncclUint64, ctx.comm, nullptr));
}

uint64_t sentOver(const Counters& c, int link) { return c[1 + link]; }
uint64_t recvOver(const Counters& c, int link) { return c[1 + chorusLinkCount + link]; }

// Every rank's deltas: `ops` calls, and exactly `bytes` sent and received
// over `link`, nothing over the other links.
void expectTraffic(RankCtx& ctx, const std::vector<Counters>& all, int link, uint64_t ops, uint64_t bytes,
                   const char* what) {
  for (int r = 0; r < ctx.nranks; ++r) {
    const Counters& c = all[r];
    if (c[0] != ops)
      ctx.fail("%s: rank %d counted %llu ops, expected %llu", what, r, (unsigned long long)c[0],
               (unsigned long long)ops);
    for (int k = 0; k < chorusLinkCount; ++k) {
      const uint64_t want = k == link ? bytes : 0;
      if (sentOver(c, k) != want || recvOver(c, k) != want)
        ctx.fail("%s: rank %d link %d sent %llu received %llu bytes, expected %llu each", what, r, k,
                 (unsigned long long)sentOver(c, k), (unsigned long long)recvOver(c, k), (unsigned long long)want);
    }
  }
}

// A ring all-reduce of `count` floats, then two in one group, then a ring
// of point-to-point messages (a send and a receive per rank).
void checkCounters(RankCtx& ctx, int link) {
  const int n = ctx.nranks;
  const size_t count = size_t{1} << 18;  // divisible by every rank and channel count used here
  const uint64_t bytes = count * sizeof(float);
  const uint64_t ringBytes = 2 * static_cast<uint64_t>(n - 1) * bytes / static_cast<uint64_t>(n);
  std::vector<float> a(count, static_cast<float>(ctx.rank + 1)), b(count);
  std::vector<Counters> all;
  auto allReduce = [&] {
    return RANK_OK(ctx, ncclAllReduce(a.data(), b.data(), count, ncclFloat32, ncclSum, ctx.comm, nullptr));
  };
  if (!deltasOfAllRanks(ctx, allReduce, &all)) return;
  expectTraffic(ctx, all, link, 1, ringBytes, "one all-reduce");
  if (b[count - 1] != static_cast<float>(n * (n + 1) / 2))
    ctx.fail("rank %d: wrong all-reduce result %g", ctx.rank, b[count - 1]);

  auto twoInAGroup = [&] {
    return RANK_OK(ctx, ncclGroupStart()) && allReduce() && allReduce() && RANK_OK(ctx, ncclGroupEnd());
  };
  if (!deltasOfAllRanks(ctx, twoInAGroup, &all)) return;
  expectTraffic(ctx, all, link, 2, 2 * ringBytes, "two grouped all-reduces");

  const size_t msg = 100003;  // bytes, not a multiple of any slot
  std::vector<char> out(msg, static_cast<char>(ctx.rank)), in(msg);
  auto shift = [&] {
    return RANK_OK(ctx, ncclGroupStart()) &&
           RANK_OK(ctx, ncclSend(out.data(), msg, ncclInt8, (ctx.rank + 1) % n, ctx.comm, nullptr)) &&
           RANK_OK(ctx, ncclRecv(in.data(), msg, ncclInt8, (ctx.rank + n - 1) % n, ctx.comm, nullptr)) &&
           RANK_OK(ctx, ncclGroupEnd());
  };
  if (!deltasOfAllRanks(ctx, shift, &all)) return;
  expectTraffic(ctx, all, link, 2, msg, "send/recv ring");
}

RunOptions ringOptions(std::vector<std::pair<std::string, std::string>> extra = {}) {
  RunOptions opts;
  opts.env = {{"NCCL_ALGO", "Ring"}, {"NCCL_PROTO", "Simple"}, {"CHORUS_TIMEOUT_MS", "20000"}};
  for (auto& e : extra) opts.env.push_back(e);
  return opts;
}

class TrafficStats : public ::testing::TestWithParam<int> {};

TEST_P(TrafficStats, ThreadsCountInproc) {
  runThreads(
      GetParam(), [](RankCtx& ctx) { checkCounters(ctx, chorusLinkInproc); }, ringOptions());
}

TEST_P(TrafficStats, ThreadsWithFourChannelsCountInproc) {
  runThreads(
      GetParam(), [](RankCtx& ctx) { checkCounters(ctx, chorusLinkInproc); },
      ringOptions({{"NCCL_MIN_NCHANNELS", "4"}, {"NCCL_MAX_NCHANNELS", "4"}}));
}

TEST_P(TrafficStats, ProcessesCountShm) {
  runProcesses(
      GetParam(), [](RankCtx& ctx) { checkCounters(ctx, chorusLinkShm); }, ringOptions({{"NCCL_SHM_DISABLE", "0"}}));
}

TEST_P(TrafficStats, ProcessesOnSocketsCountNet) {
  runProcesses(
      GetParam(), [](RankCtx& ctx) { checkCounters(ctx, chorusLinkNet); },
      ringOptions({{"NCCL_SHM_DISABLE", "1"}, {"NCCL_NET", "Socket"}, {"NCCL_SOCKET_IFNAME", "lo"}}));
}

INSTANTIATE_TEST_SUITE_P(Ranks, TrafficStats, ::testing::Values(2, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

// The wire formats of chorusAllReduceEx (docs/wire.md): a direct
// reduce-scatter plus all-gather of 256-element blocks, so with n shards of
// whole blocks each rank sends and receives 2(n-1)/n of the blocks, each
// as 1024 bytes (fp32: native values, deterministic mode), 512 (bf16) or
// 256 codes + a 4-byte scale (fp8, int8).
TEST(TrafficStatsWire, CompressedAllReduceCountsTheEncodedBytes) {
  struct Format {
    chorusWire_t wire;
    int deterministic;
    uint64_t blockBytes;
  };
  const Format formats[] = {{chorusWireNative, 1, 1024},
                            {chorusWireBfloat16, 0, 512},
                            {chorusWireFloat8e4m3, 0, 260},
                            {chorusWireInt8, 0, 260}};
  runThreads(4, [&](RankCtx& ctx) {
    const uint64_t n = static_cast<uint64_t>(ctx.nranks), blocks = 64 * n;
    const size_t count = blocks * 256;
    std::vector<float> a(count, 1.0f), b(count);
    for (const Format& f : formats) {
      chorusReduceConfig_t config = CHORUS_REDUCE_CONFIG_INIT;
      config.wire = f.wire;
      config.deterministic = f.deterministic;
      std::vector<Counters> all;
      auto call = [&] {
        return RANK_OK(ctx,
                       chorusAllReduceEx(a.data(), b.data(), count, ncclFloat32, ncclSum, &config, ctx.comm, nullptr));
      };
      if (!deltasOfAllRanks(ctx, call, &all)) return;
      const std::string what = "wire " + std::to_string(f.wire) + " deterministic " + std::to_string(f.deterministic);
      expectTraffic(ctx, all, chorusLinkInproc, 1, 2 * (n - 1) * (blocks / n) * f.blockBytes, what.c_str());
      if (b[count - 1] != 4.0f) ctx.fail("%s: result %g, expected 4", what.c_str(), b[count - 1]);
    }
  });
}

// A registered send buffer between threads goes zero-copy (one descriptor
// slot): counted as the bytes the receiver copies, like any other send.
TEST(TrafficStatsZeroCopy, RegisteredSendCountsItsPayload) {
  runThreads(2, [](RankCtx& ctx) {
    const size_t msg = 3 << 20;
    std::vector<char> out(msg, 1), in(msg);
    void* handle = nullptr;
    if (!RANK_OK(ctx, ncclCommRegister(ctx.comm, out.data(), msg, &handle))) return;
    std::vector<Counters> all;
    auto shift = [&] {
      return RANK_OK(ctx, ncclGroupStart()) &&
             RANK_OK(ctx, ncclSend(out.data(), msg, ncclInt8, 1 - ctx.rank, ctx.comm, nullptr)) &&
             RANK_OK(ctx, ncclRecv(in.data(), msg, ncclInt8, 1 - ctx.rank, ctx.comm, nullptr)) &&
             RANK_OK(ctx, ncclGroupEnd());
    };
    if (deltasOfAllRanks(ctx, shift, &all)) expectTraffic(ctx, all, chorusLinkInproc, 2, msg, "registered send");
    RANK_OK(ctx, ncclCommDeregister(ctx.comm, handle));
  });
}

TEST(TrafficStatsArgs, BadArgumentsAreRejectedWithAMessage) {
  runThreads(1, [](RankCtx& ctx) {
    chorusCommStats_t s;
    std::memset(&s, 0, sizeof s);
    s.size = sizeof s;
    ctx.expectResult(chorusCommGetStats(nullptr, &s), ncclInvalidArgument, "NULL comm");
    ctx.expectResult(chorusCommGetStats(ctx.comm, nullptr), ncclInvalidArgument, "NULL stats");
    for (size_t size : {size_t{0}, sizeof s - 8, sizeof s + 8, ~size_t{0}}) {
      s.size = size;
      if (!ctx.expectResult(chorusCommGetStats(ctx.comm, &s), ncclInvalidArgument, "wrong stats->size")) continue;
      if (std::string(ncclGetLastError(ctx.comm)).find("stats->size") == std::string::npos)
        ctx.fail("size %zu: message does not name stats->size: %s", size, ncclGetLastError(ctx.comm));
    }
    s.size = sizeof s;
    if (RANK_OK(ctx, chorusCommGetStats(ctx.comm, &s)) && s.ops != 0)
      ctx.fail("a fresh 1-rank communicator counted %llu ops", (unsigned long long)s.ops);
  });
}

}  // namespace
}  // namespace chorus::test
