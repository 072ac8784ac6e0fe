#include "host/stall_watch.h"

#include <chrono>

#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "core/log.h"
#include "core/rank_status.h"
#include "core/status_report.h"
#include "host/executor.h"
#include "kernels/common/step_rules.h"
#include "transport/fifo.h"

namespace chorus {
namespace {

constexpr int64_t kRecordAfterMs = 1000;  // idle time after which the wait is recorded
constexpr int64_t kPollEveryMs = 1000;    // how often notes are looked for
constexpr int64_t kGatherMs = 2000;       // how long a report waits for the others' notes
constexpr int64_t kGatherPollMs = 200;    // how often it looks meanwhile
constexpr int64_t kAskBoundMs = 2000;     // a status query's bound (a refused connection ends in ~1 s)
const char* const kNoteTag = "stall";

int64_t unixNowMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// The peer the first unfinished lane waits on, and in which direction.
std::pair<int, bool> waitedPeer(Plan& plan) {
  for (Lane& lane : plan.lanes) {
    const ActiveStep* a = waitingStep(plan, lane);
    if (a == nullptr) continue;
    const step::PeerOf w = step::waitedConnector(a->desc);
    if (w.connector == sched::kNoConn) return {-1, false};
    return {plan.conns[w.connector].end().peer, w.receiving};
  }
  return {-1, false};
}

StallNote ownNote(ncclComm* comm, int64_t idleMs) {
  const OpActivity::Snapshot s = comm->activity.snapshot();
  StallNote n;
  n.rank = comm->id.rank;
  n.inCall = s.inCall;
  n.collective = s.collStarted;
  n.collDone = s.collDone;
  n.waitedMs = idleMs;
  n.waitedPeer = s.waitedPeer;
  n.receiving = s.waitedReceiving;
  return n;
}

void sendNote(ncclComm* comm, int peer, const StallNote& n) {
  if (comm->bootstrap->send(peer, kNoteTag, encodeStallNote(n)) != ncclSuccess)
    CHORUS_INFO(kLogColl, "stall report: could not send a note to rank %d", peer);
}

// Reads every note that has arrived; true if one came from a rank waiting in our operation.
// A note about an operation this rank completed is left over from an earlier stall and dropped.
bool readNotes(ncclComm* comm, std::map<int, StallNote>* notes, uint64_t ourCollective) {
  const uint64_t done = comm->activity.snapshot().collDone;
  bool sameOp = false;
  comm->bootstrap->drainArrived(kNoteTag, [&](int peer, const std::vector<uint8_t>& bytes) {
    StallNote n;
    if (!decodeStallNote(bytes, &n) || n.rank != peer || (n.inCall && n.collective <= done)) return false;
    (*notes)[peer] = n;
    sameOp |= n.inCall && n.collective == ourCollective;
    return false;
  });
  return sameOp;
}

std::string callText(const OpActivity::Snapshot& s) {
  std::string text = describeCall(s.call);
  if (s.ntasks > 1) text += " and " + std::to_string(s.ntasks - 1) + " more in its group";
  return text;
}

}  // namespace

bool StallWatch::begin(std::span<ncclComm* const> comms, Clock::time_point lastProgress, int64_t idleMs) {
  if (lastProgress != since_ || comms_.size() != comms.size()) {
    resumed();
    since_ = lastProgress;
    for (ncclComm* c : comms) {
      PerComm st;
      st.comm = c;
      st.nextReportMs = c->config.stallWarnMs;
      comms_.push_back(st);
    }
  }
  return idleMs >= kRecordAfterMs;
}

void StallWatch::resumed() {
  for (PerComm& st : comms_)
    if (onDevice_) st.comm->activity.setDeviceWaiting(0, -1, false);
  recorded_ = onDevice_ = false;
  comms_.clear();
}

void StallWatch::record(std::span<const StallSubject> subjects, int64_t idleMs) {
  if (recorded_) return;
  recorded_ = true;
  const int64_t since = unixNowMs() - idleMs;
  for (const StallSubject& s : subjects) {
    if (s.onDevice) {
      onDevice_ = true;
      s.comm->activity.setDeviceWaiting(since, s.waitedPeer, s.receiving);
    } else {
      s.comm->activity.setWaiting(since, s.waitedPeer, s.receiving);
    }
  }
}

void StallWatch::idle(std::span<Plan* const> plans, Clock::time_point lastProgress, Clock::time_point now) {
  const int64_t idleMs = std::chrono::duration_cast<std::chrono::milliseconds>(now - lastProgress).count();
  if (lastProgress == since_ && comms_.size() == plans.size() && idleMs < kRecordAfterMs) return;
  std::vector<ncclComm*> comms;
  for (Plan* p : plans) comms.push_back(p->comm);
  if (!begin(comms, lastProgress, idleMs)) return;
  if (!recorded_) {
    std::vector<StallSubject> subjects;
    for (Plan* p : plans) {
      const auto [peer, receiving] = waitedPeer(*p);
      subjects.push_back({p->comm, peer, receiving, false});
    }
    record(subjects, idleMs);
  }
  for (PerComm& st : comms_) watch(st, idleMs);
}

void StallWatch::idle(const StallSubject& subject, Clock::time_point lastProgress, Clock::time_point now) {
  const int64_t idleMs = std::chrono::duration_cast<std::chrono::milliseconds>(now - lastProgress).count();
  ncclComm* comm = subject.comm;
  if (!begin(std::span<ncclComm* const>(&comm, 1), lastProgress, idleMs)) return;
  record(std::span<const StallSubject>(&subject, 1), idleMs);
  watch(comms_[0], idleMs);
}

void StallWatch::watch(PerComm& st, int64_t idleMs) {
  ncclComm* comm = st.comm;
  const int64_t warnMs = comm->config.stallWarnMs;
  if (warnMs <= 0 || comm->bootstrap == nullptr || comm->id.nranks < 2) return;
  if (idleMs < warnMs / 2) return;
  const int64_t pollEvery = st.gatherUntilMs > 0 ? kGatherPollMs : kPollEveryMs;
  if (idleMs - st.lastPollMs < pollEvery) return;
  st.lastPollMs = idleMs;
  const StallNote mine = ownNote(comm, idleMs);
  // A peer reported a stall of the operation we wait in: tell it where we are.
  if (readNotes(comm, &st.notes, mine.collective) && !st.answered) {
    st.answered = true;
    for (const auto& [peer, note] : st.notes)
      if (note.inCall && note.collective == mine.collective) sendNote(comm, peer, mine);
  }
  if (st.gatherUntilMs == 0 && idleMs >= st.nextReportMs) {
    // Time for a report: our note to everyone, then the others' notes are
    // gathered while the executor keeps polling (up to kGatherMs).
    st.nextReportMs += warnMs;
    st.answered = true;
    st.gatherUntilMs = idleMs + kGatherMs;
    for (int peer = 0; peer < comm->id.nranks; ++peer)
      if (peer != comm->id.rank) sendNote(comm, peer, mine);
    return;
  }
  if (st.gatherUntilMs == 0) return;
  if (static_cast<int>(st.notes.size()) < comm->id.nranks - 1 && idleMs < st.gatherUntilMs) return;
  st.gatherUntilMs = 0;
  st.answered = false;
  StallPicture picture{comm->id.nranks, mine, callText(comm->activity.snapshot()), st.notes, {}};
  // Ranks without a note are not waiting in the library: their mailboxes say what they last did.
  for (int peer = 0; peer < comm->id.nranks; ++peer)
    if (peer != comm->id.rank && st.notes.count(peer) == 0)
      picture.asked[peer] = askRankStatus(comm, peer, kAskBoundMs);
  CHORUS_WARN(kLogColl, "rank %d: no progress for %lld s: %s", comm->id.rank, static_cast<long long>(idleMs / 1000),
              formatStallLine(picture).c_str());
  writeStatusReportIfConfigured();
}

}  // namespace chorus
