// Turns a rank's tasks into a HostPlan: tuner decision per task, then the
// schedule from src/sched/ expanded into lanes of steps, requesting the
// connectors each step needs from the communicator's connection table.
#pragma once

#include <map>
#include <tuple>

#include "enqueue/task_tune.h"
#include "graph/comm_graph.h"
#include "host/host_plan.h"
#include "sched/ring.h"
#include "transport/connection_table.h"

namespace chorus {

// A channel's ring as the schedules see it: position p holds rank at(p).
// Without a graph the ring is the rank order.
struct RingOrder {
  const int* order = nullptr;
  const int* position = nullptr;
  int at(int pos) const { return order ? order[pos] : pos; }
  int positionOf(int rank) const { return position ? position[rank] : rank; }
};

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
  // Whether a send of [p, p + bytes) may go zero-copy: the range is
  // registered with the communicator and NCCL_LOCAL_REGISTER allows it.
  bool zeroCopySource(const void* p, size_t bytes) const;
  int rank() const;
  int nranks() const;
  const graph::CommGraph* graph() const;  // null when the communicator has none (rank-order rings)
  RingOrder ringOrder(int channel) const;

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
ncclResult_t expandHier(PlanBuilder& b, const Task& t, const TuneDecision& d);
ncclResult_t expandP2P(PlanBuilder& b, const Task& t, std::vector<const Task*>* selfSends,
                       std::vector<const Task*>* selfRecvs);
ncclResult_t expandLocal(PlanBuilder& b, const Task& t);

// The step a ring schedule's `action` makes on one chunk: which connectors it
// uses and whether it reads `src`, writes `dst`, pre-multiplies, divides.
HostStep ringActionStep(const Task& t, sched::RingAction action, RecvConnector* recv, SendConnector* send,
                        const char* src, char* dst, size_t count);

// Elements of one ring chunk: half a FIFO, so a step never waits for room.
size_t ringChunkElems(const PlanBuilder& b, Proto proto, size_t esz);

// A step whose only input is `src` (with PreMulSum applied if pre) and only output `dst`.
HostStep localStep(const Task& t, const char* src, char* dst, size_t count, bool pre, bool post);

}  // namespace chorus
