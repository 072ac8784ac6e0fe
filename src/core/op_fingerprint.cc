#include "core/op_fingerprint.h"

#include <cstdio>
#include <string>

namespace chorus {
namespace {

bool reduces(CollType c) { return c == CollType::AllReduce || c == CollType::Reduce || c == CollType::ReduceScatter; }

bool rooted(CollType c) {
  return c == CollType::Broadcast || c == CollType::Reduce || c == CollType::Gather || c == CollType::Scatter;
}

bool pairwise(const OpPrint& p) { return isSendOrRecv(static_cast<CollType>(p.coll)); }

// "op #17" or "send #3 from rank 0 to rank 1" for the call `p` of rank `self`
// whose other end is rank `other`, unless `p` names it in `root` (a send in
// a cycle of sends, plan/setup_notes.cc: not towards the reporting rank).
int labelOf(const OpPrint& p, int self, int other, char* out, size_t n) {
  if (!pairwise(p)) return snprintf(out, n, "op #%u", p.seq);
  if (p.root != kNoRoot) other = p.root;
  const bool sends = static_cast<CollType>(p.coll) == CollType::Send;
  return snprintf(out, n, "send #%u from rank %d to rank %d", p.seq, sends ? self : other, sends ? other : self);
}

}  // namespace

OpPrint makeOpPrint(CollType coll, size_t count, ncclDataType_t dtype, ReduceKind kind, int root, uint32_t seq,
                    uint8_t wire, bool deterministic) {
  OpPrint p;
  p.count = count;
  p.seq = seq;
  p.root = rooted(coll) ? root : kNoRoot;
  p.coll = static_cast<uint8_t>(coll);
  p.dtype = static_cast<uint8_t>(dtype);
  p.op = reduces(coll) ? static_cast<uint8_t>(kind) : kNoRedOp;
  p.valid = 1;
  p.wire = wire;
  p.deterministic = deterministic ? 1 : 0;
  return p;
}

const char* dtypeName(int t) {
  if (t < 0 || t >= ncclNumTypes) return "?";
  switch (static_cast<ncclDataType_t>(t)) {
    case ncclInt8:
      return "int8";
    case ncclUint8:
      return "uint8";
    case ncclInt32:
      return "int32";
    case ncclUint32:
      return "uint32";
    case ncclInt64:
      return "int64";
    case ncclUint64:
      return "uint64";
    case ncclFloat16:
      return "half";
    case ncclFloat32:
      return "float";
    case ncclFloat64:
      return "double";
    case ncclBfloat16:
      return "bfloat16";
    case ncclFloat8e4m3:
      return "fp8e4m3";
    case ncclFloat8e5m2:
      return "fp8e5m2";
    default:
      return "?";
  }
}

const char* reduceKindName(ReduceKind k) {
  switch (k) {
    case ReduceKind::Sum:
      return "sum";
    case ReduceKind::Prod:
      return "prod";
    case ReduceKind::Max:
      return "max";
    case ReduceKind::Min:
      return "min";
    case ReduceKind::PreMulSum:
      return "premulsum";
    case ReduceKind::SumPostDiv:
      return "avg";
  }
  return "?";
}

namespace {

// ", int8 wire, deterministic" for a reduction that does not travel as its
// datatype (docs/wire.md); "" otherwise.
std::string wireSuffix(const OpPrint& p) {
  static const char* const kWireNames[] = {"native", "bf16", "fp8", "int8"};
  std::string s;
  if (p.wire != 0) {
    s += ", ";
    s += p.wire < 4 ? kWireNames[p.wire] : "unknown";
    s += " wire";
  }
  if (p.deterministic) s += ", deterministic";
  return s;
}

}  // namespace

int describeOpPrint(const OpPrint& p, char* out, size_t n) {
  const char* name = collName(static_cast<CollType>(p.coll));
  const char* type = dtypeName(p.dtype);
  const auto count = static_cast<unsigned long long>(p.count);
  const std::string wire = wireSuffix(p);
  if (p.op != kNoRedOp && p.root != kNoRoot)
    return snprintf(out, n, "%s(%llu x %s, %s, root %d%s)", name, count, type,
                    reduceKindName(static_cast<ReduceKind>(p.op)), p.root, wire.c_str());
  if (p.op != kNoRedOp)
    return snprintf(out, n, "%s(%llu x %s, %s%s)", name, count, type, reduceKindName(static_cast<ReduceKind>(p.op)),
                    wire.c_str());
  if (p.root != kNoRoot && !pairwise(p)) return snprintf(out, n, "%s(%llu x %s, root %d)", name, count, type, p.root);
  return snprintf(out, n, "%s(%llu x %s)", name, count, type);
}

namespace {

// A cycle of waits (kWaitCycleMark): "Recv(1000 x float) from rank 0".
int describeWait(const OpPrint& p, char* out, size_t n) {
  char call[96];
  describeOpPrint(p, call, sizeof(call));
  const bool sends = static_cast<CollType>(p.coll) == CollType::Send;
  return snprintf(out, n, "%s #%u %s rank %d", call, p.seq, sends ? "to" : "from", p.root);
}

int describeWaitCycle(const OpMismatchRecord& r, char* out, size_t n) {
  char mine[128], theirs[128];
  describeWait(r.mine, mine, sizeof(mine));
  describeWait(r.theirs, theirs, sizeof(theirs));
  return snprintf(out, n,
                  "deadlock: rank %d called %s, rank %d called %s, and every rank of the cycle waits for the next "
                  "(a send and a receive that must run together belong in one ncclGroupStart/ncclGroupEnd)",
                  r.rank, mine, r.peer, theirs);
}

}  // namespace

int describeOpMismatch(const OpMismatchRecord& r, char* out, size_t n) {
  if (r.mine.pad == kWaitCycleMark && pairwise(r.mine) && pairwise(r.theirs)) return describeWaitCycle(r, out, n);
  char label[96], mine[96], theirs[96], theirLabel[96] = "";
  labelOf(r.mine, r.rank, r.peer, label, sizeof(label));
  describeOpPrint(r.mine, mine, sizeof(mine));
  if (!r.theirs.valid) {
    snprintf(theirs, sizeof(theirs), "an operation without a fingerprint");
  } else {
    describeOpPrint(r.theirs, theirs, sizeof(theirs));
    // The peer's call is a different operation, not a different shape of
    // the same one: say which.
    // Two sends (or receives) towards each other are two operations too.
    if (r.theirs.seq != r.mine.seq || pairwise(r.theirs) != pairwise(r.mine) ||
        (pairwise(r.mine) && r.theirs.coll == r.mine.coll)) {
      const int k = labelOf(r.theirs, r.peer, r.rank, theirLabel, sizeof(theirLabel) - 1);
      if (k > 0 && static_cast<size_t>(k) < sizeof(theirLabel) - 2) {
        theirLabel[k] = ' ';
        theirLabel[k + 1] = '\0';
      }
    }
  }
  return snprintf(out, n, "%s: rank %d called %s, rank %d called %s%s", label, r.rank, mine, r.peer, theirLabel,
                  theirs);
}

uint32_t OpCounters::nextWith(CollType coll, int peer) {
  const auto p = static_cast<size_t>(peer);
  if (p >= send_.size()) {
    send_.resize(p + 1, 0);
    recv_.resize(p + 1, 0);
  }
  return coll == CollType::Send ? ++send_[p] : ++recv_[p];
}

}  // namespace chorus
