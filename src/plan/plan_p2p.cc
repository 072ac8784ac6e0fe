// Point-to-point work: Send/Recv, and AlltoAll/Gather/Scatter expressed as
// sets of sends and receives (each rank exchanges directly with each peer).
// Every (peer, direction) gets its own lane, so a rank's sends and receives
// progress independently whatever order the ranks issued them in. Sends from
// registered buffers are marked direct: zero-copy where the connector allows
// it (kernels/common/direct_slot.h).
#include "core/result.h"
#include "plan/plan_builder.h"

namespace chorus {
namespace {

ncclResult_t addSend(PlanBuilder& b, const Task& t, int peer, const char* src, size_t count) {
  if (count == 0) return ncclSuccess;
  sched::Segment s = b.local(t, src, nullptr, count, false, false);
  if (b.zeroCopySource(src, count * typeSize(t.dtype))) s.flags |= sched::kSegDirect;
  CHORUS_CHECK(b.sendTo(ConnClass::P2P, Proto::Simple, 0, peer, &s.conn[2]));
  b.lane(ConnClass::P2P, Proto::Simple, 0, peer, true).segments.push_back(s);
  return ncclSuccess;
}

ncclResult_t addRecv(PlanBuilder& b, const Task& t, int peer, char* dst, size_t count) {
  if (count == 0) return ncclSuccess;
  sched::Segment s = b.local(t, nullptr, dst, count, false, false);
  CHORUS_CHECK(b.recvFrom(ConnClass::P2P, Proto::Simple, 0, peer, &s.conn[0]));
  b.lane(ConnClass::P2P, Proto::Simple, 0, peer, false).segments.push_back(s);
  return ncclSuccess;
}

void addLocalCopy(PlanBuilder& b, const Task& t, const char* src, char* dst, size_t count) {
  if (count == 0 || src == dst) return;
  b.lane(ConnClass::P2P, Proto::Simple, 0, b.rank(), false)
      .segments.push_back(b.local(t, src, dst, count, false, false));
}

}  // namespace

ncclResult_t expandP2P(PlanBuilder& b, const Task& t, std::vector<const Task*>* selfSends,
                       std::vector<const Task*>* selfRecvs) {
  const int n = b.nranks(), r = b.rank();
  const size_t esz = typeSize(t.dtype);
  const char* src = static_cast<const char*>(t.sendbuff);
  char* dst = static_cast<char*>(t.recvbuff);
  const size_t blk = t.count * esz;
  switch (t.type) {
    case CollType::Send:
      if (t.root == r)
        selfSends->push_back(&t);
      else
        CHORUS_CHECK(addSend(b, t, t.root, src, t.count));
      return ncclSuccess;
    case CollType::Recv:
      if (t.root == r)
        selfRecvs->push_back(&t);
      else
        CHORUS_CHECK(addRecv(b, t, t.root, dst, t.count));
      return ncclSuccess;
    case CollType::AlltoAll:
      for (int p = 0; p < n; ++p) {
        if (p == r) continue;
        CHORUS_CHECK(addSend(b, t, p, src + p * blk, t.count));
        CHORUS_CHECK(addRecv(b, t, p, dst + p * blk, t.count));
      }
      addLocalCopy(b, t, src + r * blk, dst + r * blk, t.count);
      return ncclSuccess;
    case CollType::Gather:
      if (r != t.root) return addSend(b, t, t.root, src, t.count);
      for (int p = 0; p < n; ++p)
        if (p != r) CHORUS_CHECK(addRecv(b, t, p, dst + p * blk, t.count));
      addLocalCopy(b, t, src, dst + r * blk, t.count);
      return ncclSuccess;
    case CollType::Scatter:
      if (r != t.root) return addRecv(b, t, t.root, dst, t.count);
      for (int p = 0; p < n; ++p)
        if (p != r) CHORUS_CHECK(addSend(b, t, p, src + p * blk, t.count));
      addLocalCopy(b, t, src + r * blk, dst, t.count);
      return ncclSuccess;
    default:
      return fail(ncclInternalError, "p2p expansion requested for %s", collName(t.type));
  }
}

}  // namespace chorus
