// Communicator lifecycle.
//
// Every creation path ends in initMembers(): a new communicator joins the job
// through the unique id's store (claims its rank, learns every rank's
// mailbox: bootstrap/mesh_join.h); a split/shrink child already has its
// bootstrap, derived from the parent's without any exchange. initMembers then
// exchanges PeerInfo with an all-gather and creates the (empty) connection
// table; connectors are made lazily by the first operation that needs them. A
// creation runs inline (blocking), where the caller's DeferRendezvous puts it
// (inside a group: at ncclGroupEnd), or on a background thread
// (config.blocking = 0, polled through
// ncclCommGetAsyncError). This file knows nothing of groups: the API layer,
// which does, passes the group's queue in (docs/architecture.md, "Layers").
#include "core/comm_lifecycle.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/mesh.h"
#include "bootstrap/mesh_join.h"
#include "bootstrap/unique_id.h"
#include "core/comm.h"
#include "core/comm_finalize.h"
#include "core/comm_graph_setup.h"
#include "core/exception_guard.h"
#include "core/host_identity.h"
#include "core/mode.h"
#include "core/rank_placement.h"
#include "core/rank_status.h"
#include "core/result.h"
#include "core/status_report.h"
#include "core/wait_limit.h"
#include "gpu/gpu_runtime.h"
#include "topo/comm_build.h"
#include "topo/comm_topology.h"
#include "topo/nic_routes.h"
#include "transport/connection_table.h"
#include "transport/transport.h"

namespace chorus {
namespace {

struct MemberSpec {
  bool fromId = false;  // join the job named by `id`; else comm->bootstrap is set already
  ncclUniqueId id{};
  int rank = 0;
  int nranks = 0;
};

// With more ranks on this machine than CPUs, a rank that spins waiting for a
// peer burns the time slice the peer needs to make progress: unless
// CHORUS_SPIN_COUNT says otherwise, waits yield straight away instead. The
// machine, not the host: "hosts" that are network namespaces or containers
// of one kernel (NCCL_HOSTID) compete for the same cores.
void adaptToOversubscription(ncclComm* comm) {
  if (!comm->config.spinCountAuto) return;
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  comm->config.spinCount = autoSpinCount(comm->id.machineNRanks, cpus);
  if (comm->config.spinCount == 0)
    CHORUS_INFO(kLogInit, "comm %p: %d ranks on this machine's %ld CPUs: waits yield instead of spinning", (void*)comm,
                comm->id.machineNRanks, cpus);
}

// Collective slots sized for where the ranks are (slotBytesForPlacement),
// unless the user chose a size. Every rank computes the same size, as both
// ends of a connector must.
void adaptSlotsToPlacement(ncclComm* comm, const RankPlacement& placement) {
  if (!comm->config.slotBytesAuto) return;
  comm->config.collSlotBytes = slotBytesForPlacement(comm->id.nranks, placement.mostHostNRanks);
  if (comm->config.collSlotBytes != comm->config.slotBytes)
    CHORUS_INFO(kLogInit, "comm %p: every host holds one of its %d ranks: collective slots of %u bytes", (void*)comm,
                comm->id.nranks, comm->config.collSlotBytes);
}

ncclResult_t exchangePeers(ncclComm* comm, const WaitBound& bound) {
  PeerInfo mine;
  mine.rank = comm->id.rank;
  mine.pid = getpid();
  mine.hostHash = hostHash();
  mine.machineHash = machineHash();
  mine.processToken = processToken();
  mine.cudaDev = comm->id.cudaDev;
  mine.hostMode = comm->id.hostMode ? 1 : 0;
  if (!comm->id.hostMode) {
    snprintf(mine.busId, sizeof(mine.busId), "%s", gpu::pciBusId(comm->id.cudaDev).c_str());
    mine.visibleGpus = gpu::visibleGpusHash();
  }
  // The topology record rides on the same all-gather: no extra round.
  struct InitRecord {
    PeerInfo peer;
    topo::TopoRankRecord topo;
  };
  InitRecord myRecord{mine, {}};
  CHORUS_CHECK(topo::localTopoRecord(&myRecord.topo));
  std::vector<InitRecord> records(comm->id.nranks);
  CHORUS_CHECK(comm->bootstrap->allGather(&myRecord, sizeof(myRecord), records.data(), bound));
  std::vector<PeerInfo> peers(comm->id.nranks);
  std::vector<topo::TopoRankRecord> topoRecords(comm->id.nranks);
  for (int r = 0; r < comm->id.nranks; ++r) {
    peers[r] = records[r].peer;
    topoRecords[r] = records[r].topo;
  }
  for (const PeerInfo& p : peers)
    if (p.hostMode != mine.hostMode)
      return fail(ncclInvalidUsage, "rank %d runs in %s mode but rank %d in %s mode: all ranks must agree", mine.rank,
                  mine.hostMode ? "host" : "GPU", p.rank, p.hostMode ? "host" : "GPU");
  const RankPlacement placement = placeRank(peers, mine);
  comm->id.localNRanks = placement.localNRanks;
  comm->id.localRank = placement.localRank;
  comm->id.machineNRanks = placement.machineNRanks;
  adaptToOversubscription(comm);
  adaptSlotsToPlacement(comm, placement);
  comm->conns =
      std::make_unique<ConnectionTable>(comm->id.rank, comm->bootstrap.get(), std::move(peers), comm->id.commHash,
                                        comm->config.timeoutMs, &comm->traffic, comm->config.netName);
  comm->conns->setCoresShared(ranksOutnumberCpus(comm->id.machineNRanks, sysconf(_SC_NPROCESSORS_ONLN)));
  CHORUS_CHECK(topo::buildCommTopology(comm, topoRecords, bound));
  if (!comm->id.hostMode) {
    topo::GpuNicRoutes routes = topo::gpuNicRoutes(*comm->topology, comm->id.rank);
    // A GPU the topology does not place (no NVML): every NIC counts as SYS
    // away, so only NCCL_NET_GDR_LEVEL=SYS puts slots in device memory.
    if (!routes.known) routes = topo::GpuNicRoutes{true, {}, topo::PathType::SYS};
    routes.gpuDirectRdma = gpu::gpuDirectRdmaSupported(comm->id.cudaDev);
    comm->conns->setNicRoutes(std::make_shared<const topo::GpuNicRoutes>(std::move(routes)));
  }
  return ncclSuccess;
}

// Joins the job through the id's store, then talks rank to rank (mesh.h).
ncclResult_t joinFromId(ncclComm* comm, const MemberSpec& spec, const WaitBound& bound, std::shared_ptr<Store>* job) {
  UniqueIdInfo info;
  CHORUS_CHECK(decodeUniqueId(spec.id, &info));
  CHORUS_CHECK(connectStore(spec.id, spec.rank, bound, job));
  std::shared_ptr<Mesh> mesh;
  CHORUS_CHECK(Mesh::open(info.secret, info.addr, &mesh));
  const std::string prefix = "c" + std::to_string(hashBytes(&spec.id, sizeof(spec.id))) + "/";
  std::vector<SockAddr> mailboxes;
  CHORUS_CHECK(joinJob(**job, prefix, spec.rank, spec.nranks, *mesh, bound, &mailboxes));
  comm->bootstrap = std::make_unique<Bootstrap>(std::move(mesh), prefix, spec.rank, std::move(mailboxes));
  return ncclSuccess;
}

// The knobs that change what a reduction computes are never silent.
void logWireKnobs(const ncclComm* comm) {
  static const char* const kWires[] = {"native", "bf16", "fp8", "int8"};
  const CommConfig& c = comm->config;
  if (c.wire != 0)
    CHORUS_INFO(kLogInit,
                "comm %p rank %d: CHORUS_WIRE=%s: float/half/bf16 sum and avg AllReduce and "
                "ReduceScatter of >= %llu bytes travel compressed%s",
                (void*)comm, comm->id.rank, kWires[c.wire & 3], (unsigned long long)c.wireMinBytes,
                c.wireFeedback ? ", with error feedback" : "");
  if (c.deterministic)
    CHORUS_INFO(kLogInit,
                "comm %p rank %d: CHORUS_DETERMINISTIC=1: every reduction is the rank-order sum, rounded "
                "once",
                (void*)comm, comm->id.rank);
}

ncclResult_t initMembers(ncclComm* comm, MemberSpec spec) {
  // Init may run on a thread of the library (a group's init, a non-blocking
  // init): make the communicator's device current there. On the caller's
  // thread it already is (newComm took it from there).
  if (!comm->id.hostMode) CHORUS_CHECK(gpu::selectDevice(comm->id.cudaDev));
  WaitBound bound = waitBoundLimit(comm->config.initTimeoutMs, &comm->abortFlag);
  std::shared_ptr<Store> job;  // held until init is done: a process that serves it may exit after that
  if (spec.fromId) CHORUS_CHECK(joinFromId(comm, spec, bound, &job));
  const std::string& prefix = comm->bootstrap->prefix();
  comm->id.commHash = hashBytes(prefix.data(), prefix.size());
  publishRankStatus(comm);
  CHORUS_CHECK(exchangePeers(comm, bound));
  if (!comm->id.hostMode) CHORUS_CHECK(gpu::commSetup(comm));  // sizes channels: before the graph search
  CHORUS_CHECK(setupCommGraph(comm));
  CHORUS_INFO(kLogInit, "comm %p hash %016llx rank %d/%d (local %d/%d) ready in %s mode%s%s", (void*)comm,
              (unsigned long long)comm->id.commHash, comm->id.rank, comm->id.nranks, comm->id.localRank,
              comm->id.localNRanks, comm->id.hostMode ? "host" : "GPU", comm->config.commName.empty() ? "" : " name ",
              comm->config.commName.c_str());
  logWireKnobs(comm);
  return ncclSuccess;
}

// Allocates and registers a communicator in the "initializing" state. A
// split/shrink child (parent != null) inherits the parent's config defaults,
// mode and device; a new communicator resolves the mode and takes the
// calling thread's current device (GPU mode), like NCCL.
ncclResult_t newComm(int rank, int nranks, const CommConfig& config, const ncclComm* parent, ncclComm** out) {
  ModeChoice mode;
  CHORUS_CHECK(chooseMode(parent, &mode));
  auto* comm = new ncclComm();
  comm->config = config;
  comm->id.rank = rank;
  comm->id.nranks = nranks;
  comm->id.hostMode = mode.hostMode;
  comm->id.cudaDev = mode.device;
  comm->asyncError = ncclInProgress;
  CommRegistry::instance().add(comm);
  installStatusSignal();
  *out = comm;
  return ncclSuccess;
}

// Runs initMembers now, where `defer` puts it (inside a group), or on a background thread.
ncclResult_t launchInit(ncclComm* comm, MemberSpec spec, const DeferRendezvous& defer, ncclComm_t* out) {
  auto body = [comm, spec]() -> ncclResult_t {
    ncclResult_t res = guardedCall("communicator init", [&] { return initMembers(comm, spec); });
    if (res != ncclSuccess) {
      commSetError(comm, res, lastErrorMessage());
      comm->asyncError = res;
      return res;
    }
    comm->asyncError = ncclSuccess;
    return ncclSuccess;
  };
  *out = comm;
  if (comm->config.blocking == 0) {
    comm->initThread = std::thread([body] { body(); });
    return ncclInProgress;
  }
  if (defer) return defer(comm, /*finalize=*/false, body);
  ncclResult_t res = body();
  if (res != ncclSuccess) {
    std::string msg = lastErrorMessage();
    commDiscard(comm);
    *out = nullptr;
    return fail(res, "%s", msg.c_str());
  }
  return ncclSuccess;
}

}  // namespace

void commDiscard(ncclComm* comm) {
  CommRegistry::instance().remove(comm);
  if (comm->initThread.joinable()) comm->initThread.join();
  gpu::commTeardown(comm, /*abort=*/true);  // init failed after GPU setup (destroy tore down already)
  delete comm;
}

ncclResult_t commInitRank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank, const ncclConfig_t* cfg,
                          const DeferRendezvous& defer) {
  CommConfig config;
  CHORUS_CHECK(resolveCommConfig(cfg, nullptr, &config));
  ncclComm* comm = nullptr;
  CHORUS_CHECK(newComm(rank, nranks, config, nullptr, &comm));
  MemberSpec spec;
  spec.fromId = true;
  spec.id = id;
  spec.rank = rank;
  spec.nranks = nranks;
  return launchInit(comm, spec, defer, out);
}

namespace {

// The split itself: the membership exchange over the parent (every rank of
// it takes part), then the child's init. `defer` is only the init's.
ncclResult_t splitNow(ncclComm* parent, int color, int key, ncclComm_t* out, const CommConfig& config,
                      const DeferRendezvous& defer) {
  struct Entry {
    int color, key, rank;
  };
  Entry mine{color, key, parent->id.rank};
  std::vector<Entry> all(parent->id.nranks);
  int child = 0;
  {
    std::lock_guard<std::mutex> lock(parent->opMutex);  // no operation of the parent runs meanwhile
    WaitBound bound = waitBoundLimit(parent->config.initTimeoutMs, &parent->abortFlag);
    CHORUS_CHECK(parent->bootstrap->allGather(&mine, sizeof(mine), all.data(), bound));
    child = parent->childCount++;
  }
  *out = nullptr;
  if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
  std::vector<Entry> members;
  for (const Entry& e : all)
    if (e.color == color) members.push_back(e);
  std::stable_sort(members.begin(), members.end(),
                   [](const Entry& a, const Entry& b) { return a.key != b.key ? a.key < b.key : a.rank < b.rank; });
  int newRank = 0;
  while (members[newRank].rank != parent->id.rank) ++newRank;
  std::vector<int> order;
  for (const Entry& e : members) order.push_back(e.rank);
  ncclComm* comm = nullptr;
  CHORUS_CHECK(newComm(newRank, static_cast<int>(members.size()), config, parent, &comm));
  comm->bootstrap = parent->bootstrap->child(
      parent->bootstrap->prefix() + "s" + std::to_string(child) + "." + std::to_string(color) + "/", order);
  MemberSpec spec;
  spec.rank = newRank;
  spec.nranks = static_cast<int>(members.size());
  return launchInit(comm, spec, defer, out);
}

}  // namespace

ncclResult_t commSplit(ncclComm* parent, int color, int key, ncclComm_t* out, const ncclConfig_t* cfg,
                       const DeferRendezvous& defer) {
  CommConfig config;
  CHORUS_CHECK(resolveCommConfig(cfg, &parent->config, &config));
  if (!defer) return splitNow(parent, color, key, out, config, defer);
  // Inside a group the membership exchange waits for every rank of the
  // parent, and one thread may drive several of them (a process with one GPU
  // per rank splits all its communicators in one group): the whole split
  // runs at the group's end, each on its own thread, and *out is set there.
  *out = nullptr;
  return defer(parent, /*finalize=*/false,
               [parent, color, key, out, config] { return splitNow(parent, color, key, out, config, {}); });
}

ncclResult_t commShrink(ncclComm* parent, const int* exclude, int nexclude, ncclComm_t* out, const ncclConfig_t* cfg,
                        int flags, const DeferRendezvous& defer) {
  std::vector<bool> gone(parent->id.nranks, false);
  for (int i = 0; i < nexclude; ++i) {
    if (exclude[i] < 0 || exclude[i] >= parent->id.nranks)
      return fail(ncclInvalidArgument, "ncclCommShrink: excluded rank %d is out of range [0, %d)", exclude[i],
                  parent->id.nranks);
    gone[exclude[i]] = true;
  }
  if (gone[parent->id.rank])
    return fail(ncclInvalidArgument,
                "ncclCommShrink: rank %d is in its own exclude list; excluded ranks must not call it", parent->id.rank);
  if (flags & NCCL_SHRINK_ABORT) {
    parent->revoked = true;  // ends operations still running on the parent
    gpu::commSignalAbort(parent);
    std::lock_guard<std::mutex> wait(parent->opMutex);
  }
  int newRank = 0, newN = 0;
  std::vector<int> survivors;
  for (int r = 0; r < parent->id.nranks; ++r) {
    if (gone[r]) continue;
    if (r < parent->id.rank) ++newRank;
    ++newN;
    survivors.push_back(r);
  }
  int child = 0;
  {
    std::lock_guard<std::mutex> lock(parent->opMutex);
    child = parent->childCount++;
  }
  CommConfig config;
  CHORUS_CHECK(resolveCommConfig(cfg, &parent->config, &config));
  ncclComm* comm = nullptr;
  CHORUS_CHECK(newComm(newRank, newN, config, parent, &comm));
  comm->bootstrap =
      parent->bootstrap->child(parent->bootstrap->prefix() + "k" + std::to_string(child) + "/", survivors);
  MemberSpec spec;
  spec.rank = newRank;
  spec.nranks = newN;
  return launchInit(comm, spec, defer, out);
}

ncclResult_t commRevoke(ncclComm* comm) {
  comm->revoked = true;
  gpu::commSignalAbort(comm);                       // running kernels stop too
  std::lock_guard<std::mutex> wait(comm->opMutex);  // returns once the running operation has stopped
  return ncclSuccess;
}

ncclResult_t commDestroy(ncclComm* comm) {
  if (comm->initThread.joinable()) comm->initThread.join();
  { std::lock_guard<std::mutex> wait(comm->opMutex); }
  const bool aborting = comm->abortFlag.load();
  // Finalize first (unless done, aborted, revoked or failed): no peer still
  // expects data from this rank when its connections close and its process
  // may exit. It fails only when a peer is gone; the comm is freed anyway.
  const ncclResult_t finalized = aborting ? ncclSuccess : commFinalizeForDestroy(comm);
  const std::string finalizeError = finalized == ncclSuccess ? std::string() : lastErrorMessage();
  // GPU mode: kernels still running are waited for (bounded) or, on abort,
  // stopped, before the FIFOs they use are freed with the connections.
  gpu::commTeardown(comm, aborting || comm->revoked.load());
  commDiscard(comm);
  // Network links are closed by the proxy thread: destroy returns once that
  // happened (bounded), so no connection outlives it; abort does not wait.
  if (!aborting) awaitRetiredConnections(std::chrono::milliseconds(kCloseDrainMs + 2000));
  if (finalized != ncclSuccess) return fail(finalized, "ncclCommDestroy: %s", finalizeError.c_str());
  return ncclSuccess;
}

ncclResult_t commAbort(ncclComm* comm) {
  comm->abortFlag = true;
  gpu::commSignalAbort(comm);
  return commDestroy(comm);
}

}  // namespace chorus
