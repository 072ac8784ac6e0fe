// Turns a rank's tasks into a Plan: tuner decision per task, then the
// schedule from src/sched/ as segments of lanes, requesting the connectors
// each segment needs from a ConnectorSource (the communicator's connection
// table, or chorus-topo's dry source).
#pragma once

#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/comm_config.h"
#include "enqueue/task_tune.h"
#include "graph/comm_graph.h"
#include "plan/plan.h"
#include "sched/ring.h"
#include "transport/connector_source.h"

namespace chorus {

// A channel's ring as the schedules see it: position p holds rank at(p).
// Without a graph the ring is the rank order.
struct RingOrder {
  const int* order = nullptr;
  const int* position = nullptr;
  int at(int pos) const { return order ? order[pos] : pos; }
  int positionOf(int rank) const { return position ? position[rank] : rank; }
};

class RegistrationTable;

// What a plan is built against: the rank, the knobs, the graph, the
// registered buffers (null: none) and where connectors come from.
struct PlanContext {
  int rank = 0;
  int nranks = 1;
  const CommConfig* config = nullptr;
  const graph::CommGraph* graph = nullptr;  // null: rank-order rings and trees
  RegistrationTable* registrations = nullptr;
  ConnectorSource* conns = nullptr;
  // Which executor runs the plan: it decides how much of a slot one piece
  // carries (pieceBytes).
  bool hostMode = true;
};

// The context of a communicator.
PlanContext planContextOf(ncclComm* comm);

class PlanBuilder {
 public:
  PlanBuilder(const PlanContext& ctx, Plan* plan);
  PlanBuilder(ncclComm* comm, Plan* plan) : PlanBuilder(planContextOf(comm), plan) {}
  // Builds lanes for every task in plan->tasks.
  ncclResult_t build();

  // Used by the per-algorithm expanders (plan_ring.cc, plan_tree.cc, plan_p2p.cc).
  Lane& lane(ConnClass cls, Proto proto, int channel, int peer = -1, bool sendSide = false);
  // The id (Segment::conn) of a connector, requested from the connection table.
  ncclResult_t recvFrom(ConnClass cls, Proto proto, int channel, int peer, int16_t* id);
  ncclResult_t sendTo(ConnClass cls, Proto proto, int channel, int peer, int16_t* id);
  // The same with FIFOs of `slotBytes` x `nslots` (wire connectors: smaller
  // slots, so an all-to-all of many ranks stays small).
  ncclResult_t connect(const ConnKey& key, bool send, uint32_t slotBytes, uint32_t nslots, int16_t* id);
  // A segment for task `t`, with its buffers; the caller sets the rest.
  sched::Segment segment(const Task& t, sched::SegmentKind kind) const;
  // A Single segment of task `t` whose only input is `src` (with PreMulSum
  // applied if pre) and only output `dst` (either may be null).
  sched::Segment local(const Task& t, const void* src, void* dst, size_t count, bool pre, bool post) const;
  // The index of a ring order in the plan's rank table (added once).
  int32_t addRingTable(const RingOrder& ring);
  // Appends `n` entries to the plan's rank table (a WireOwner's connector
  // ids); returns the index of the first.
  int32_t addTableEntries(const int32_t* entries, int n);
  // The slot of a connector of class `cls` and protocol `p` (CommConfig:
  // point-to-point and collective Simple slots may differ).
  uint32_t slotBytes(ConnClass cls, Proto p) const;
  // Payload of one piece through a slot of protocol p, as the plan's executor
  // moves it: the whole slot on the host; on the GPU an LL piece carries
  // dev::llPieceBytes of its slot (half is flags, and it is staged in shared
  // memory). Steps that must fit half a FIFO are sized in these pieces.
  uint32_t pieceBytes(ConnClass cls, Proto p) const;
  uint32_t nslots() const;
  // Whether a send of [p, p + bytes) may go zero-copy: the range is
  // registered with the communicator and NCCL_LOCAL_REGISTER allows it.
  bool zeroCopySource(const void* p, size_t bytes) const;
  int rank() const;
  int nranks() const;
  const graph::CommGraph* graph() const;  // null when the communicator has none (rank-order rings)
  const CommConfig& config() const;
  RingOrder ringOrder(int channel) const;

 private:
  ncclResult_t expand(const Task& task, const TuneDecision& d);
  ncclResult_t pairSelfCopies();
  void markStreamingOutputs();
  int16_t connId(RecvConnector* recv, SendConnector* send);

  PlanContext ctx_;
  Plan* plan_;
  std::map<std::tuple<int, int, int, int, int>, size_t> laneIndex_;
  std::vector<const Task*> selfSends_, selfRecvs_;
  std::unordered_map<const void*, int16_t> connIds_;
  // Ring order (its ranks by position) -> its entry in the plan's rank table:
  // channels whose rings have the same order share one, which keeps a GPU
  // launch's table (kLaunchMaxRankTable entries) from growing with channels.
  std::map<std::vector<int32_t>, int32_t> ringTables_;
};

// Per-algorithm expanders.
ncclResult_t expandRing(PlanBuilder& b, const Task& t, const TuneDecision& d);
ncclResult_t expandTree(PlanBuilder& b, const Task& t, const TuneDecision& d);
ncclResult_t expandDirect(PlanBuilder& b, const Task& t, const TuneDecision& d);
ncclResult_t expandHier(PlanBuilder& b, const Task& t, const TuneDecision& d);
ncclResult_t expandP2P(PlanBuilder& b, const Task& t, std::vector<const Task*>* selfSends,
                       std::vector<const Task*>* selfRecvs);
ncclResult_t expandLocal(PlanBuilder& b, const Task& t);
// The direct reductions of docs/wire.md (plan_wire.cc), for tasks whose
// WireSpec is active, whatever the tuner chose.
ncclResult_t expandWire(PlanBuilder& b, const Task& t);
// Whether a wire task takes the two-level form across hosts, and that form
// (plan_wire_hosts.cc).
bool wireAcrossHosts(const PlanBuilder& b, const Task& t);
ncclResult_t expandWireHosts(PlanBuilder& b, const Task& t);
// Whether a deterministic AllReduce takes the chain across hosts, and that
// form (plan_wire_chain.cc).
bool wireChainAcrossHosts(const PlanBuilder& b, const Task& t);
ncclResult_t expandWireChain(PlanBuilder& b, const Task& t);
// Whether the communicator's H > 1 hosts hold G > 1 consecutive ranks each
// (host k: ranks kG .. kG + G - 1), the layout both chains need.
bool wireChainLayout(const PlanBuilder& b);
// Whether a deterministic ReduceScatter or Reduce takes its chain across
// hosts, and that form (plan_wire_chain_rs.cc).
bool wireChainToOwnersAcrossHosts(const PlanBuilder& b, const Task& t);
ncclResult_t expandWireChainToOwners(PlanBuilder& b, const Task& t);

// Elements of one step chunk through connectors of class `cls`: half a FIFO
// of pieces, so a step never waits for room.
size_t halfFifoElems(const PlanBuilder& b, ConnClass cls, Proto proto, size_t esz);

}  // namespace chorus
