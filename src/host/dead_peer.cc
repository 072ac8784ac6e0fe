#include "host/dead_peer.h"

#include <algorithm>
#include <string>

#include "core/comm.h"
#include "host/executor.h"
#include "transport/connection_table.h"

namespace chorus {
namespace {

enum class Need { None, Receive, Send, Completion };

int peerOf(const Plan& plan, int16_t conn) { return plan.conns[static_cast<size_t>(conn)].end().peer; }

bool sendsTo(const Plan& plan, const sched::StepDesc& d, int peer) {
  for (int i = 0; i < d.nSend; ++i)
    if (peerOf(plan, d.send[i]) == peer) return true;
  return false;
}

// Whether a step of `seg` from `first` on sends to `peer`. Every round of a
// segment uses the same connectors in the same order (only the last may be
// shorter), so the rest of this round and one more cover them all.
bool segmentSendsTo(const Plan& plan, const sched::Segment& seg, uint64_t first, int peer) {
  const uint64_t total = sched::segmentSteps(seg);
  const uint64_t end = std::min(total, first + 2 * sched::stepsPerRound(seg));
  for (uint64_t i = first; i < end; ++i) {
    const sched::StepDesc d = sched::segmentStep(seg, plan.ringTableOf(seg), i);
    if (d.count > 0 && sendsTo(plan, d, peer)) return true;
  }
  return false;
}

Need laneNeeds(const Plan& plan, Lane& lane, int peer, bool proxiesDrained) {
  const ActiveStep* a = waitingStep(plan, lane);
  if (a == nullptr) return Need::None;
  // A receive a proxy feeds (net) counts once its link failed or the proxy
  // had time to move what the peer sent before it exited.
  for (int i = 0; i < a->desc.nRecv; ++i) {
    RecvConnector* in = a->recv[i];
    if (peerOf(plan, a->desc.recv[i]) != peer) continue;
    const bool settled = !in->end().health || proxiesDrained || in->end().health->failed();
    if (settled && !in->ready()) return Need::Receive;
  }
  if (sendsTo(plan, a->desc, peer)) return Need::Send;  // the step is not done: pieces are left to send
  if (segmentSendsTo(plan, lane.segments[lane.seg], lane.step + 1, peer)) return Need::Send;
  for (size_t s = lane.seg + 1; s < lane.segments.size(); ++s)
    if (segmentSendsTo(plan, lane.segments[s], 0, peer)) return Need::Send;
  return Need::None;
}

}  // namespace

std::vector<int> deadLocalPeers(const Plan& plan) {
  std::vector<int> dead;
  const ncclComm* comm = plan.comm;
  const PeerInfo& self = comm->conns->peer(comm->id.rank);
  for (const PeerInfo& p : comm->conns->peers()) {
    if (p.rank == self.rank || p.hostHash != self.hostHash || p.processToken == self.processToken) continue;
    if (!peerProcessAlive(p.pid)) dead.push_back(p.rank);
  }
  return dead;
}

ncclResult_t checkDeadPeersNeeded(Plan& plan, const std::vector<int>& dead, bool proxiesDrained) {
  const ncclComm* comm = plan.comm;
  std::string needed, others;
  for (const int rank : dead) {
    Need need = Need::None;
    for (size_t l = 0; l < plan.lanes.size() && need == Need::None; ++l)
      need = laneNeeds(plan, plan.lanes[l], rank, proxiesDrained);
    if (need == Need::None && awaitedCompletion(plan) == rank) need = Need::Completion;
    const std::string who =
        "peer rank " + std::to_string(rank) + " (pid " + std::to_string(comm->conns->peer(rank).pid);
    if (need == Need::None) {
      others += (others.empty() ? "" : ", ") + who + ")";
      continue;
    }
    needed += (needed.empty() ? "" : ", ") + who + ", " +
              (need == Need::Receive      ? "data still to come from it"
               : need == Need::Completion ? "it had not completed the operation"
                                          : "data still to send to it") +
              ")";
  }
  if (needed.empty()) return ncclSuccess;
  // The others may be why a needed peer failed and left: name them too.
  if (!others.empty()) others = "; also gone: " + others;
  return fail(ncclRemoteError, "rank %d: %s exited during the operation%s", comm->id.rank, needed.c_str(),
              others.c_str());
}

}  // namespace chorus
