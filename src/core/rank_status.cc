#include "core/rank_status.h"

#include <chrono>

#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "core/result.h"

namespace chorus {

void publishRankStatus(ncclComm* comm) {
  if (comm->bootstrap == nullptr) return;
  const OpActivity* activity = &comm->activity;
  const int rank = comm->id.rank;
  comm->bootstrap->publishStatus([activity, rank] {
    const OpActivity::Snapshot s = activity->snapshot();
    RankStatus st;
    st.rank = rank;
    st.inCall = s.inCall;
    st.collStarted = s.collStarted;
    st.collDone = s.collDone;
    st.sinceLastCallMs = activity->msSinceLastCall();
    return encodeRankStatus(st);
  });
}

PeerAnswer askRankStatus(ncclComm* comm, int peer, int64_t boundMs) {
  PeerAnswer a;
  if (comm->bootstrap == nullptr) return a;
  const auto started = std::chrono::steady_clock::now();
  const std::string previous = lastErrorMessage();
  std::vector<uint8_t> bytes;
  const ncclResult_t res = comm->bootstrap->queryStatus(peer, boundMs, &bytes);
  const auto tookMs =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
  if (res != ncclSuccess) {
    a.why = lastErrorMessage();
    restoreLastError(previous);  // a failed query is part of the report, not this rank's error
    a.kind = tookMs < boundMs ? PeerAnswer::kGone : PeerAnswer::kNoAnswer;
    return a;
  }
  if (decodeRankStatus(bytes, &a.status) && a.status.rank == peer) a.kind = PeerAnswer::kAnswered;
  return a;
}

}  // namespace chorus
