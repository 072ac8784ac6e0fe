// Turns a rank's tasks into a HostPlan: tuner decision per task, then the
// schedule from src/sched/ expanded into lanes of steps, requesting the
// connectors each step needs from the communicator's connection table.
#pragma once

#include <map>
#include <tuple>

#include "host/host_plan.h"
#include "transport/connection_table.h"
#include "tune/tuner.h"

namespace chorus {

class PlanBuilder {
 public:
  PlanBuilder(ncclComm* comm, HostPlan* plan);
  // Builds lanes for every task in plan->tasks.
  ncclResult_t build();

  // Used by the per-algorithm expanders (plan_ring.cc, plan_tree.cc, plan_p2p.cc).
  Lane& lane(ConnClass cls, Proto proto, int channel, int peer = -1, bool sendSide = false);
  ncclResult_t recvFrom(ConnClass cls, Proto proto, int channel, int peer, RecvConnector** out);
  ncclResult_t sendTo(ConnClass cls, Proto proto, int channel, int peer, SendConnector** out);
  uint32_t slotBytes(Proto p) const;
  uint32_t nslots() const;
  int rank() const;
  int nranks() const;

 private:
  ncclResult_t expand(const Task& task, const TuneDecision& d);
  ncclResult_t pairSelfCopies();
  void markStreamingOutputs();

  ncclComm* comm_;
  HostPlan* plan_;
  std::map<std::tuple<int, int, int, int, int>, size_t> laneIndex_;
  std::vector<const Task*> selfSends_, selfRecvs_;
};

// Per-algorithm expanders.
ncclResult_t expandRing(PlanBuilder& b, const Task& t, const TuneDecision& d);
ncclResult_t expandTree(PlanBuilder& b, const Task& t, const TuneDecision& d);
ncclResult_t expandDirect(PlanBuilder& b, const Task& t, const TuneDecision& d);
ncclResult_t expandP2P(PlanBuilder& b, const Task& t, std::vector<const Task*>* selfSends,
                       std::vector<const Task*>* selfRecvs);
ncclResult_t expandLocal(PlanBuilder& b, const Task& t);

// A step whose only input is `src` (with PreMulSum applied if pre) and only output `dst`.
HostStep localStep(const Task& t, const char* src, char* dst, size_t count, bool pre, bool post);

}  // namespace chorus
