// Helpers shared by the network transport tests: driving a backend's
// requests to completion with a deadline, and per-rank host identities for
// forked ranks (each process its own NCCL_HOSTID, so the net transport is used).
#pragma once

#include <chrono>
#include <string>

#include "chorus/net_plugin.h"
#include "common/rank_runner.h"
#include "nccl.h"
#include "transport/transport.h"

namespace chorus::test {

// Tests one request until done, an error, or `ms` pass. Returns the last
// result; *timedOut is set when the deadline ended it.
ncclResult_t waitRequest(const chorusNet_v1_t* net, void* request, size_t* size, int ms, bool* timedOut);

// Sets NCCL_HOSTID so that ranks [host * ranksPerHost, ...) share a host, then
// creates the rank's communicator from ctx.id. False (recorded) on failure.
bool initOnHost(RankCtx& ctx, int ranksPerHost, ncclComm_t* comm);

// A peer of this process that claims host `host` and process `token`, so
// that two ends in one test process connect through the net transport.
PeerInfo peerOn(int rank, uint64_t host, uint64_t token);

}  // namespace chorus::test
