#include "wire/wire_cases.h"

#include <cstring>
#include <string>
#include <vector>

namespace chorus::test {

const char* detCallName(DetCall c) {
  switch (c) {
    case DetCall::AllReduceEx:
      return "chorusAllReduceEx";
    case DetCall::AllReduce:
      return "ncclAllReduce";
    case DetCall::ReduceScatterEx:
      return "chorusReduceScatterEx";
    case DetCall::ReduceScatter:
      return "ncclReduceScatter";
    case DetCall::Reduce:
      return "ncclReduce";
  }
  return "?";
}

namespace {

ncclRedOp_t plainOp(DetOp op) {
  switch (op) {
    case DetOp::Prod:
      return ncclProd;
    case DetOp::Max:
      return ncclMax;
    case DetOp::Min:
      return ncclMin;
    case DetOp::Avg:
      return ncclAvg;
    default:
      return ncclSum;
  }
}

bool scatters(DetCall c) { return c == DetCall::ReduceScatterEx || c == DetCall::ReduceScatter; }

}  // namespace

bool runDetCase(RankCtx& ctx, ncclComm_t comm, const DetCase& c) {
  const int n = ctx.nranks, me = ctx.rank, root = c.root >= 0 ? c.root : n - 1;
  const size_t esz = detTypeSize(c.type);
  const size_t sendCount = scatters(c.call) ? c.count * static_cast<size_t>(n) : c.count;
  std::vector<char> send(sendCount * esz + 1), recv(c.count * esz + 1, 0x5a);
  for (size_t i = 0; i < sendCount; ++i) storeBits(send.data(), i, esz, detInput(c.type, c.op, me, i));
  char* out = recv.data();
  if (c.inPlace) out = scatters(c.call) ? send.data() + static_cast<size_t>(me) * c.count * esz : send.data();
  ncclRedOp_t op = plainOp(c.op);
  uint64_t scalar = detScalar(c.type, me);
  if (c.op == DetOp::PreMul &&
      !RANK_OK(ctx, ncclRedOpCreatePreMulSum(&op, &scalar, c.type, ncclScalarHostImmediate, comm)))
    return false;
  chorusReduceConfig_t cfg = CHORUS_REDUCE_CONFIG_INIT;
  cfg.deterministic = 1;
  ncclResult_t res = ncclSuccess;
  switch (c.call) {
    case DetCall::AllReduceEx:
      res = chorusAllReduceEx(send.data(), out, c.count, c.type, op, &cfg, comm, nullptr);
      break;
    case DetCall::AllReduce:
      res = ncclAllReduce(send.data(), out, c.count, c.type, op, comm, nullptr);
      break;
    case DetCall::ReduceScatterEx:
      res = chorusReduceScatterEx(send.data(), out, c.count, c.type, op, &cfg, comm, nullptr);
      break;
    case DetCall::ReduceScatter:
      res = ncclReduceScatter(send.data(), out, c.count, c.type, op, comm, nullptr);
      break;
    case DetCall::Reduce:
      res = ncclReduce(send.data(), out, c.count, c.type, op, root, comm, nullptr);
      break;
  }
  if (c.op == DetOp::PreMul) ncclRedOpDestroy(op, comm);
  const std::string what = std::string(detCallName(c.call)) + " " + std::to_string(n) + " ranks type " +
                           std::to_string(c.type) + " " + detOpName(c.op) + " count " + std::to_string(c.count) +
                           (c.inPlace ? " in place" : "");
  if (!ctx.expectResult(res, ncclSuccess, what.c_str())) return false;
  if (c.call == DetCall::Reduce && me != root) return true;
  const size_t base = scatters(c.call) ? static_cast<size_t>(me) * c.count : 0;
  int bad = 0;
  for (size_t i = 0; i < c.count && bad < 3; ++i) {
    const uint64_t got = loadBits(out, i, esz), want = detExpected(c.type, c.op, n, base + i);
    if (got != want) {
      ctx.fail("rank %d: %s: element %zu is 0x%llx, expected 0x%llx", me, what.c_str(), i,
               static_cast<unsigned long long>(got), static_cast<unsigned long long>(want));
      ++bad;
    }
  }
  return bad == 0;
}

}  // namespace chorus::test
