#include "core/peer_watch.h"

#include <chrono>
#include <memory>

#include "core/comm.h"
#include "core/result.h"
#include "host/executor.h"
#include "transport/connection_table.h"

namespace chorus {

bool commPeerProcessGone(const ncclComm* comm, std::string* why) {
  if (!comm->conns) return false;
  const PeerInfo& self = comm->conns->peer(comm->id.rank);
  for (const PeerInfo& p : comm->conns->peers()) {
    if (p.rank == self.rank || p.hostHash != self.hostHash || p.processToken == self.processToken) continue;
    if (!peerProcessAlive(p.pid)) {
      *why = "peer rank " + std::to_string(p.rank) + " (pid " + std::to_string(p.pid) + ") exited";
      return true;
    }
  }
  return false;
}

bool commPeerGone(const ncclComm* comm, std::string* why) {
  if (!comm->conns) return false;
  return commPeerProcessGone(comm, why) || comm->conns->brokenLink(why);
}

namespace {
constexpr auto kCheckEvery = std::chrono::milliseconds(250);
}  // namespace

WaitBound watchPeers(WaitBound bound, const ncclComm* comm, std::string* why) {
  auto next = std::make_shared<Clock::time_point>(Clock::now() + kCheckEvery);
  bound.stop = [comm, why, next, inner = bound.stop]() {
    if (inner && inner()) return true;
    if (!why->empty()) return true;
    const auto now = Clock::now();
    if (now < *next) return false;
    *next = now + kCheckEvery;
    return commPeerGone(comm, why);
  };
  return bound;
}

ncclResult_t explainPeerGone(ncclResult_t res, const ncclComm* comm, const std::string& why) {
  if (res == ncclSuccess || why.empty()) return res;
  const std::string cause = lastErrorMessage();
  return fail(ncclRemoteError, "rank %d: %s while this rank waited for it (%s)", comm->id.rank, why.c_str(),
              cause.c_str());
}

}  // namespace chorus
