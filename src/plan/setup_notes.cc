#include "plan/setup_notes.h"

#include <algorithm>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "core/little_endian.h"
#include "core/log.h"
#include "kernels/common/step_rules.h"
#include "plan/plan.h"

namespace chorus {
namespace {

const char* const kNoteTag = "opnote";
constexpr uint64_t kMagic = 0x3130544f4e504fULL;  // "OPNOT01"
constexpr uint8_t kOps = 1, kVerdict = 2;
constexpr size_t kHeader = 16;     // magic, kind, count, rank
constexpr size_t kTaskBytes = 32;  // OpPrint, peer, padding
constexpr size_t kMaxTasks = 64;   // a note names the first tasks of a large group only

bool pointToPoint(const OpPrint& p) {
  const auto c = static_cast<CollType>(p.coll);
  return c == CollType::Send || c == CollType::Recv;
}

std::vector<uint8_t> header(uint8_t kind, size_t count, int rank, size_t body) {
  std::vector<uint8_t> b(kHeader + body, 0);
  storeLittleEndian(b.data(), kMagic, 8);
  b[8] = kind;
  b[9] = static_cast<uint8_t>(count);
  storeLittleEndian(b.data() + 12, static_cast<uint32_t>(rank), 4);
  return b;
}

void post(const Plan& plan, int peer, std::vector<uint8_t> note) {
  if (plan.comm->bootstrap->send(peer, kNoteTag, std::move(note)) != ncclSuccess)
    CHORUS_INFO(kLogColl, "rank %d: could not send a setup note to rank %d", plan.comm->id.rank, peer);
}

struct NoteTask {
  OpPrint print;
  int peer;  // of a Send/Recv
};

std::vector<NoteTask> noteTasks(const uint8_t* tasks, size_t count) {
  std::vector<NoteTask> out(count);
  for (size_t i = 0; i < count; ++i) {
    std::memcpy(&out[i].print, tasks + i * kTaskBytes, sizeof(OpPrint));
    out[i].peer = static_cast<int32_t>(static_cast<uint32_t>(loadLittleEndian(tasks + i * kTaskBytes + 24, 4)));
  }
  return out;
}

// The first task of `tasks` of type `coll` with peer `peer`, or nullptr.
const NoteTask* findP2p(const std::vector<NoteTask>& tasks, CollType coll, int peer) {
  for (const NoteTask& t : tasks)
    if (static_cast<CollType>(t.print.coll) == coll && t.peer == peer) return &t;
  return nullptr;
}

// Crossed sends: this rank sends to the peer and does not receive from it,
// while the peer (which waits on this rank in setup) sends to this rank a
// message this rank has not numbered a receive for, and does not receive
// from it. Neither call can finish before the other: a deadlock, reported
// like a mismatch.
bool crossedSends(const Plan& plan, const std::vector<NoteTask>& mine, int peer, const std::vector<NoteTask>& theirs,
                  OpMismatchRecord* r) {
  const int self = plan.comm->id.rank;
  const NoteTask* out = findP2p(mine, CollType::Send, peer);
  const NoteTask* in = findP2p(theirs, CollType::Send, self);
  if (out == nullptr || in == nullptr || findP2p(mine, CollType::Recv, peer) != nullptr ||
      findP2p(theirs, CollType::Recv, self) != nullptr || in->print.seq <= plan.comm->opCounters.received(peer))
    return false;
  *r = OpMismatchRecord{out->print, in->print, self, peer};
  return true;
}

// The mismatch between the plan and one note of rank `peer`, if any.
bool judgeOps(const Plan& plan, int peer, const uint8_t* tasks, size_t count, OpMismatchRecord* r) {
  const int self = plan.comm->id.rank;
  std::vector<NoteTask> mine;
  for (size_t k = 0; k < plan.tasks.size() && k < plan.stamps.size(); ++k)
    mine.push_back({plan.stamps[k].mine, plan.tasks[k].root});
  const std::vector<NoteTask> theirs = noteTasks(tasks, count);
  for (const NoteTask& t : theirs)
    for (const NoteTask& m : mine) {
      if (!notesDisagree(m.print, m.peer, self, t.print, t.peer, peer)) continue;
      *r = OpMismatchRecord{m.print, t.print, self, peer};
      return true;
    }
  return crossedSends(plan, mine, peer, theirs, r);
}

// Reads one note; true with *r on a mismatch or a verdict.
bool judge(const Plan& plan, int peer, const std::vector<uint8_t>& b, OpMismatchRecord* r, bool* selfFound) {
  if (b.size() < kHeader || loadLittleEndian(b.data(), 8) != kMagic ||
      static_cast<int>(loadLittleEndian(b.data() + 12, 4)) != peer)
    return false;
  const size_t count = b[9];
  if (b[8] == kOps && b.size() == kHeader + count * kTaskBytes) {
    *selfFound = true;
    return judgeOps(plan, peer, b.data() + kHeader, count, r);
  }
  if (b[8] == kVerdict && b.size() == kHeader + sizeof(OpMismatchRecord)) {
    std::memcpy(r, b.data() + kHeader, sizeof(*r));
    *selfFound = false;
    return true;
  }
  return false;
}

}  // namespace

bool notesDisagree(const OpPrint& mine, int minePeer, int self, const OpPrint& theirs, int theirPeer, int peer) {
  if (!mine.valid || !theirs.valid || mine.seq != theirs.seq) return false;
  if (pointToPoint(mine) != pointToPoint(theirs)) return false;
  if (!pointToPoint(mine)) return !step::printMatches(theirs, mine);
  // A Send #k to the peer is its Recv #k from this rank, and the other way round.
  if (minePeer != peer || theirPeer != self || mine.coll == theirs.coll) return false;
  return !step::printMatches(step::expectedFromPeer(theirs), step::expectedFromPeer(mine));
}

void sendSetupNotes(const Plan& plan, const std::vector<int>& peers) {
  const size_t count = std::min(plan.stamps.size(), kMaxTasks);
  std::vector<uint8_t> note = header(kOps, count, plan.comm->id.rank, count * kTaskBytes);
  for (size_t i = 0; i < count; ++i) {
    uint8_t* t = note.data() + kHeader + i * kTaskBytes;
    std::memcpy(t, &plan.stamps[i].mine, sizeof(OpPrint));
    storeLittleEndian(t + 24, static_cast<uint32_t>(plan.tasks[i].root), 4);
  }
  for (int peer : peers) post(plan, peer, note);
}

void sendVerdictNotes(const Plan& plan, const OpMismatchRecord& r) {
  std::vector<uint8_t> note = header(kVerdict, 0, plan.comm->id.rank, sizeof(r));
  std::memcpy(note.data() + kHeader, &r, sizeof(r));
  for (int peer = 0; peer < plan.comm->id.nranks; ++peer)
    if (peer != plan.comm->id.rank) post(plan, peer, note);
}

bool readSetupNotes(const Plan& plan, OpMismatchRecord* r, bool* selfFound) {
  ncclComm* comm = plan.comm;
  if (comm->bootstrap == nullptr || plan.stamps.empty()) return false;
  return comm->bootstrap->drainArrived(kNoteTag, [&](int peer, const std::vector<uint8_t>& bytes) {
    if (!judge(plan, peer, bytes, r, selfFound)) return false;
    if (*selfFound) sendVerdictNotes(plan, *r);
    return true;
  });
}

}  // namespace chorus
