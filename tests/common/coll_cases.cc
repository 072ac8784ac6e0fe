#include "common/coll_cases.h"

#include <cstdio>
#include <cstring>

namespace chorus::test {

const char* collName(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "AllReduce";
    case Coll::Broadcast: return "Broadcast";
    case Coll::Reduce: return "Reduce";
    case Coll::AllGather: return "AllGather";
    case Coll::ReduceScatter: return "ReduceScatter";
    case Coll::AlltoAll: return "AlltoAll";
    case Coll::Gather: return "Gather";
    case Coll::Scatter: return "Scatter";
    case Coll::SendRecvRing: return "SendRecvRing";
  }
  return "?";
}

const std::vector<Coll>& allColls() {
  static const std::vector<Coll> colls = {Coll::AllReduce, Coll::Broadcast, Coll::Reduce,
                                          Coll::AllGather, Coll::ReduceScatter, Coll::AlltoAll,
                                          Coll::Gather,    Coll::Scatter,   Coll::SendRecvRing};
  return colls;
}

bool collReduces(Coll c) { return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter; }
bool collHasRoot(Coll c) {
  return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Gather || c == Coll::Scatter;
}
bool collSupportsInPlace(Coll c) { return c != Coll::AlltoAll && c != Coll::SendRecvRing; }

namespace {

// Elements in the blocked buffer (n blocks of count) of collectives that have one.
bool sendBlocked(Coll c) { return c == Coll::ReduceScatter || c == Coll::AlltoAll || c == Coll::Scatter; }
bool recvBlocked(Coll c) { return c == Coll::AllGather || c == Coll::AlltoAll || c == Coll::Gather; }

ncclRedOp_t builtinOp(OpKind k) {
  switch (k) {
    case OpKind::Sum: return ncclSum;
    case OpKind::Prod: return ncclProd;
    case OpKind::Max: return ncclMax;
    case OpKind::Min: return ncclMin;
    case OpKind::Avg: return ncclAvg;
    default: return ncclSum;
  }
}

}  // namespace

std::string describe(const Case& c, int nranks) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%s %s%s%s count=%zu %s%s nranks=%d", collName(c.coll), typeInfo(c.type).name,
                collReduces(c.coll) ? " " : "", collReduces(c.coll) ? opName(c.op) : "", c.count,
                c.inPlace ? "in-place" : "out-of-place",
                collHasRoot(c.coll) ? (" root=" + std::to_string(c.root)).c_str() : "", nranks);
  std::string s = buf;
  if (c.misalign) s += " misalign=" + std::to_string(c.misalign);
  return s;
}

size_t countForBytes(Coll coll, ncclDataType_t type, int nranks, size_t bytes) {
  const size_t mult = (sendBlocked(coll) || recvBlocked(coll)) ? static_cast<size_t>(nranks) : 1;
  const size_t n = bytes / (typeInfo(type).size * mult);
  return n ? n : 1;
}

PreparedCase::PreparedCase(RankCtx& ctx, ncclComm_t comm, const Case& c) : ctx_(ctx), comm_(comm), c_(c) {}

PreparedCase::~PreparedCase() {
  if (customOp_) ncclRedOpDestroy(op_, comm_);
}

bool PreparedCase::createOp() {
  if (!collReduces(c_.coll)) return true;
  if (c_.op != OpKind::PreMulImmediate && c_.op != OpKind::PreMulDevice) {
    op_ = builtinOp(c_.op);
    return true;
  }
  const uint64_t wanted = encodeValue(c_.type, preMulScalar(c_.type, rank_));
  const uint64_t wrong = encodeValue(c_.type, 3);
  const bool device = c_.op == OpKind::PreMulDevice;
  // Host-immediate: the value is captured at creation, so overwriting it
  // afterwards must not matter. Device: the pointer is read when the
  // operation runs, so only the value stored after creation may count.
  scalar_ = device ? wrong : wanted;
  ncclResult_t res = ncclRedOpCreatePreMulSum(&op_, &scalar_, c_.type,
                                              device ? ncclScalarDevice : ncclScalarHostImmediate, comm_);
  if (res != ncclSuccess) {
    ctx_.fail("rank %d: %s: ncclRedOpCreatePreMulSum returned %s: %s", ctx_.rank, describe(c_, nranks_).c_str(),
              ncclGetErrorString(res), ncclGetLastError(nullptr));
    return false;
  }
  customOp_ = true;
  scalar_ = device ? wanted : wrong;
  return true;
}

uint64_t PreparedCase::input(int rank, size_t index) const {
  if (tables_) return tables_->input(rank, index);
  return payloadBits(c_.type, rank, index);
}

uint64_t PreparedCase::expectedOut(size_t i) const {
  const size_t n = c_.count;
  switch (c_.coll) {
    case Coll::AllReduce:
    case Coll::Reduce: return tables_->expected(i);
    case Coll::ReduceScatter: return tables_->expected(static_cast<size_t>(rank_) * n + i);
    case Coll::Broadcast: return input(c_.root, i);
    case Coll::AllGather:
    case Coll::Gather: return input(static_cast<int>(i / n), i % n);
    case Coll::AlltoAll: return input(static_cast<int>(i / n), static_cast<size_t>(rank_) * n + i % n);
    case Coll::Scatter: return input(c_.root, static_cast<size_t>(rank_) * n + i);
    case Coll::SendRecvRing: return input((rank_ + nranks_ - 1) % nranks_, i);
  }
  return 0;
}

size_t PreparedCase::recvElems() const {
  const bool atRoot = rank_ == c_.root;
  if ((c_.coll == Coll::Reduce || c_.coll == Coll::Gather) && !atRoot) return 0;
  return recvBlocked(c_.coll) ? c_.count * static_cast<size_t>(nranks_) : c_.count;
}

void PreparedCase::fillBuffers() {
  const size_t n = c_.count;
  const size_t nb = n * static_cast<size_t>(nranks_);
  const bool atRoot = rank_ == c_.root;
  auto make = [&](size_t elems) { return std::make_unique<GuardedBuffer>(elems * esize_, c_.misalign); };
  auto fillInput = [&](GuardedBuffer& b, size_t first, size_t count, int who, size_t srcFirst) {
    for (size_t i = 0; i < count; ++i) storeElem(b.data(), first + i, esize_, input(who, srcFirst + i));
  };
  // Out-of-place: sendbuff holds this rank's input, recvbuff is poisoned.
  // Buffers a rank does not need under NCCL's rules are passed as NULL.
  const bool needSend = !((c_.coll == Coll::Broadcast || c_.coll == Coll::Scatter) && !atRoot);
  const size_t sendN = sendBlocked(c_.coll) ? nb : n;
  const size_t recvN = recvElems();
  const bool recvNeeded = !((c_.coll == Coll::Reduce || c_.coll == Coll::Gather) && !atRoot);
  if (!c_.inPlace) {
    if (needSend) {
      send_ = make(sendN);
      fillInput(*send_, 0, sendN, rank_, 0);
      sendPtr_ = send_->data();
      keep_ = send_.get();
    }
    if (recvNeeded) {
      recv_ = make(recvN);
      recv_->poison();
      recvPtr_ = recv_->data();
    }
    return;
  }
  // In-place layouts (NCCL's rules): one buffer, sendbuff/recvbuff inside it.
  auto at = [&](GuardedBuffer& b, size_t elem) { return static_cast<uint8_t*>(b.data()) + elem * esize_; };
  switch (c_.coll) {
    case Coll::AllReduce:
    case Coll::Reduce:
      recv_ = make(n);
      fillInput(*recv_, 0, n, rank_, 0);
      if (!atRoot && c_.coll == Coll::Reduce) keep_ = recv_.get();  // a non-root's input stays as it was
      sendPtr_ = recvPtr_ = recv_->data();
      break;
    case Coll::Broadcast:
      recv_ = make(n);
      if (atRoot) fillInput(*recv_, 0, n, rank_, 0);
      else recv_->poison();
      sendPtr_ = recvPtr_ = recv_->data();
      break;
    case Coll::AllGather:
      recv_ = make(nb);
      recv_->poison();
      fillInput(*recv_, static_cast<size_t>(rank_) * n, n, rank_, 0);
      recvPtr_ = recv_->data();
      sendPtr_ = at(*recv_, static_cast<size_t>(rank_) * n);
      break;
    case Coll::ReduceScatter:
      send_ = make(nb);
      fillInput(*send_, 0, nb, rank_, 0);
      sendPtr_ = send_->data();
      recvPtr_ = at(*send_, static_cast<size_t>(rank_) * n);
      break;
    case Coll::Gather:
      if (atRoot) {
        recv_ = make(nb);
        recv_->poison();
        fillInput(*recv_, static_cast<size_t>(rank_) * n, n, rank_, 0);
        recvPtr_ = recv_->data();
        sendPtr_ = at(*recv_, static_cast<size_t>(rank_) * n);
      } else {
        send_ = make(n);
        fillInput(*send_, 0, n, rank_, 0);
        sendPtr_ = send_->data();
        keep_ = send_.get();
      }
      break;
    case Coll::Scatter:
      if (atRoot) {
        send_ = make(nb);
        fillInput(*send_, 0, nb, rank_, 0);
        sendPtr_ = send_->data();
        recvPtr_ = at(*send_, static_cast<size_t>(rank_) * n);
        keep_ = send_.get();  // its own block already holds its share: nothing changes
      } else {
        recv_ = make(n);
        recv_->poison();
        recvPtr_ = recv_->data();
      }
      break;
    default: break;
  }
}

bool PreparedCase::prepare() {
  if (!RANK_OK(ctx_, ncclCommUserRank(comm_, &rank_)) || !RANK_OK(ctx_, ncclCommCount(comm_, &nranks_))) return false;
  esize_ = typeInfo(c_.type).size;
  if (collReduces(c_.coll)) {
    const size_t span = c_.coll == Coll::ReduceScatter ? c_.count * static_cast<size_t>(nranks_) : c_.count;
    tables_ = std::make_unique<ReduceTables>(c_.type, c_.op, nranks_, span);
  }
  if (!createOp()) return false;
  fillBuffers();
  if (keep_) {
    const auto* p = static_cast<const uint8_t*>(keep_->data());
    keepCopy_.assign(p, p + keep_->bytes());
  }
  return true;
}

ncclResult_t PreparedCase::issue() {
  const size_t n = c_.count;
  const ncclDataType_t t = c_.type;
  switch (c_.coll) {
    case Coll::AllReduce: return ncclAllReduce(sendPtr_, recvPtr_, n, t, op_, comm_, nullptr);
    case Coll::Broadcast: return ncclBroadcast(sendPtr_, recvPtr_, n, t, c_.root, comm_, nullptr);
    case Coll::Reduce: return ncclReduce(sendPtr_, recvPtr_, n, t, op_, c_.root, comm_, nullptr);
    case Coll::AllGather: return ncclAllGather(sendPtr_, recvPtr_, n, t, comm_, nullptr);
    case Coll::ReduceScatter: return ncclReduceScatter(sendPtr_, recvPtr_, n, t, op_, comm_, nullptr);
    case Coll::AlltoAll: return ncclAlltoAll(sendPtr_, recvPtr_, n, t, comm_, nullptr);
    case Coll::Gather: return ncclGather(sendPtr_, recvPtr_, n, t, c_.root, comm_, nullptr);
    case Coll::Scatter: return ncclScatter(sendPtr_, recvPtr_, n, t, c_.root, comm_, nullptr);
    case Coll::SendRecvRing: {
      ncclResult_t res = ncclGroupStart();
      if (res != ncclSuccess) return res;
      ncclResult_t a = ncclSend(sendPtr_, n, t, (rank_ + 1) % nranks_, comm_, nullptr);
      ncclResult_t b = ncclRecv(recvPtr_, n, t, (rank_ + nranks_ - 1) % nranks_, comm_, nullptr);
      res = ncclGroupEnd();
      return a != ncclSuccess ? a : b != ncclSuccess ? b : res;
    }
  }
  return ncclInvalidArgument;
}

bool PreparedCase::checkRange(const char* what, const void* base, size_t n,
                              const std::function<uint64_t(size_t)>& expected) {
  size_t bad = 0;
  std::string detail;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t got = loadElem(base, i, esize_);
    const uint64_t want = expected(i);
    if (got == want) continue;
    if (++bad <= 3)
      detail += " [" + std::to_string(i) + "] got " + bitsToString(c_.type, got) + " want " +
                bitsToString(c_.type, want) + ";";
  }
  if (bad == 0) return true;
  ctx_.fail("rank %d: %s: %zu of %zu elements of %s wrong:%s", rank_, describe(c_, nranks_).c_str(), bad, n, what,
            detail.c_str());
  return false;
}

bool PreparedCase::verify() {
  bool ok = true;
  if (recvPtr_ != nullptr)
    ok &= checkRange("recvbuff", recvPtr_, recvElems(), [this](size_t i) { return expectedOut(i); });
  if (keep_ != nullptr) {
    const std::vector<uint8_t>& before = keepCopy_;
    ok &= checkRange("the input buffer (must be unchanged)", keep_->data(), keep_->bytes() / esize_,
                     [&](size_t i) { return loadElem(before.data(), i, esize_); });
  }
  for (GuardedBuffer* b : {send_.get(), recv_.get()}) {
    if (b == nullptr) continue;
    std::string damage = b->guardDamage();
    if (!damage.empty()) {
      ctx_.fail("rank %d: %s: %s (%s)", rank_, describe(c_, nranks_).c_str(), damage.c_str(),
                b == send_.get() ? "send buffer" : "recv buffer");
      ok = false;
    }
  }
  return ok;
}

bool PreparedCase::recvStillPoisoned() const {
  if (!recv_) return true;
  const auto* p = static_cast<const uint8_t*>(recv_->data());
  for (size_t i = 0; i < recv_->bytes(); ++i)
    if (p[i] != GuardedBuffer::kPoisonByte) return false;
  return true;
}

bool runCase(RankCtx& ctx, ncclComm_t comm, const Case& c) {
  PreparedCase p(ctx, comm, c);
  if (!p.prepare()) return false;
  ncclResult_t res = p.issue();
  if (res != ncclSuccess) {
    int n = 0;
    ncclCommCount(comm, &n);
    ctx.fail("rank %d: %s: call returned %s: %s", ctx.rank, describe(c, n).c_str(), ncclGetErrorString(res),
             ncclGetLastError(nullptr));
    return false;
  }
  return p.verify();
}

bool runCase(RankCtx& ctx, const Case& c) { return runCase(ctx, ctx.comm, c); }

int runSelection(RankCtx& ctx, Coll coll, const Selection& sel) {
  static const std::vector<OpKind> kNoOp = {OpKind::Sum};
  const std::vector<OpKind>& ops = collReduces(coll) ? sel.ops : kNoOp;
  int index = 0;
  for (ncclDataType_t t : sel.types)
    for (OpKind op : ops)
      for (size_t count : sel.counts)
        for (bool inPlace : sel.inPlace) {
          if (inPlace && !collSupportsInPlace(coll)) continue;
          Case c;
          c.coll = coll;
          c.type = t;
          c.op = op;
          c.count = count;
          c.inPlace = inPlace;
          c.root = index % ctx.nranks;
          ++index;
          PreparedCase p(ctx, ctx.comm, c);
          if (!p.prepare()) return index;
          ncclResult_t res = p.issue();
          if (res != ncclSuccess) {
            // Peers are now out of step with this rank: stop rather than hang them one case at a time.
            ctx.fail("rank %d: %s: call returned %s: %s", ctx.rank, describe(c, ctx.nranks).c_str(),
                     ncclGetErrorString(res), ncclGetLastError(nullptr));
            return index;
          }
          p.verify();
        }
  return index;
}

}  // namespace chorus::test
