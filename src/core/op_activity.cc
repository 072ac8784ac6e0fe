#include "core/op_activity.h"

#include <chrono>

namespace chorus {

const char* dtypeName(ncclDataType_t t) {
  static const char* const kNames[] = {"int8",    "uint8", "int32",  "uint32",   "int64",      "uint64",
                                       "float16", "float", "double", "bfloat16", "float8e4m3", "float8e5m2"};
  const int i = static_cast<int>(t);
  return i >= 0 && i < static_cast<int>(sizeof(kNames) / sizeof(kNames[0])) ? kNames[i] : "unknown type";
}

std::string redOpName(ncclRedOp_t op) {
  static const char* const kNames[] = {"sum", "prod", "max", "min", "avg"};
  const int i = static_cast<int>(op);
  if (i >= 0 && i < static_cast<int>(ncclNumOps)) return kNames[i];
  return "premulsum op " + std::to_string(i);
}

namespace {

bool isReduction(CollType t) {
  return t == CollType::AllReduce || t == CollType::Reduce || t == CollType::ReduceScatter;
}
bool isRooted(CollType t) {
  return t == CollType::Broadcast || t == CollType::Reduce || t == CollType::Gather || t == CollType::Scatter;
}

}  // namespace

std::string describeCall(const CallSummary& call) {
  std::string s = collName(call.type);
  s += "(" + std::to_string(call.count) + " x " + dtypeName(call.dtype);
  if (isReduction(call.type)) s += ", " + redOpName(call.op);
  if (isRooted(call.type)) s += ", root " + std::to_string(call.root);
  if (call.type == CollType::Send) s += ", to rank " + std::to_string(call.root);
  if (call.type == CollType::Recv) s += ", from rank " + std::to_string(call.root);
  return s + ")";
}

void OpActivity::begin(const CallSummary& first, int ntasks, int collectives) {
  constexpr auto r = std::memory_order_relaxed;
  type_.store(static_cast<int>(first.type), r);
  count_.store(first.count, r);
  dtype_.store(static_cast<int>(first.dtype), r);
  op_.store(static_cast<int>(first.op), r);
  root_.store(first.root, r);
  ntasks_.store(ntasks, r);
  pendingColl_.store(collectives, r);
  collStarted_.fetch_add(static_cast<uint64_t>(collectives), r);
  p2pStarted_.fetch_add(static_cast<uint64_t>(ntasks - collectives), r);
  waitingSince_.store(0, r);
  inCall_.store(true, std::memory_order_release);
}

void OpActivity::end() {
  constexpr auto r = std::memory_order_relaxed;
  const int coll = pendingColl_.load(r);
  collDone_.fetch_add(static_cast<uint64_t>(coll), r);
  p2pDone_.fetch_add(static_cast<uint64_t>(ntasks_.load(r) - coll), r);
  waitingSince_.store(0, r);
  inCall_.store(false, std::memory_order_release);
}

void OpActivity::setWaiting(int64_t sinceUnixMs, int peer, bool receiving) {
  constexpr auto r = std::memory_order_relaxed;
  waitedPeer_.store(peer, r);
  waitedReceiving_.store(receiving, r);
  waitingSince_.store(sinceUnixMs, r);
}

OpActivity::Snapshot OpActivity::snapshot() const {
  constexpr auto r = std::memory_order_relaxed;
  Snapshot s;
  s.inCall = inCall_.load(std::memory_order_acquire);
  s.call.type = static_cast<CollType>(type_.load(r));
  s.call.count = count_.load(r);
  s.call.dtype = static_cast<ncclDataType_t>(dtype_.load(r));
  s.call.op = static_cast<ncclRedOp_t>(op_.load(r));
  s.call.root = root_.load(r);
  s.ntasks = ntasks_.load(r);
  s.collStarted = collStarted_.load(r);
  s.collDone = collDone_.load(r);
  s.p2pStarted = p2pStarted_.load(r);
  s.p2pDone = p2pDone_.load(r);
  s.waitingSinceUnixMs = s.inCall ? waitingSince_.load(r) : 0;
  s.waitedPeer = waitedPeer_.load(r);
  s.waitedReceiving = waitedReceiving_.load(r);
  return s;
}

}  // namespace chorus
