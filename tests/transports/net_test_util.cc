#include "net_test_util.h"

#include <unistd.h>

#include <cstdlib>
#include <thread>

namespace chorus::test {

ncclResult_t waitRequest(const chorusNet_v1_t* net, void* request, size_t* size, int ms, bool* timedOut) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  *timedOut = false;
  for (;;) {
    int done = 0;
    ncclResult_t res = net->test(request, &done, size);
    if (res != ncclSuccess || done) return res;
    if (std::chrono::steady_clock::now() >= deadline) {
      *timedOut = true;
      return ncclSuccess;
    }
    std::this_thread::yield();
  }
}

bool initOnHost(RankCtx& ctx, int ranksPerHost, ncclComm_t* comm) {
  const std::string host = "net-test-host-" + std::to_string(ctx.rank / ranksPerHost);
  setenv("NCCL_HOSTID", host.c_str(), 1);
  *comm = nullptr;
  return RANK_OK(ctx, ncclCommInitRank(comm, ctx.nranks, ctx.id, ctx.rank));
}

PeerInfo peerOn(int rank, uint64_t host, uint64_t token) {
  PeerInfo p;
  p.rank = rank;
  p.pid = getpid();
  p.hostHash = host;
  p.processToken = token;
  return p;
}

}  // namespace chorus::test
