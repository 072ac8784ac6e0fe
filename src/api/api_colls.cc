// Collective and point-to-point entry points: validate, describe the call as
// a Task, hand it to the group layer.
#include "api/arg_checks.h"
#include "api/export.h"
#include "api/wire_args.h"
#include "core/comm.h"
#include "core/comm_query.h"
#include "core/result.h"
#include "enqueue/group.h"

using namespace chorus;

namespace {

// Common checks; resolves the reduction operator (or a plain copy spec).
// `dtype` and `op` are the raw integers the caller passed (see enumValue).
ncclResult_t prepare(Task* t, const char* fn, bool reduces, int dtype, int op) {
  CHORUS_CHECK(checkComm(t->comm, fn));
  CHORUS_CHECK(checkDatatype(dtype, fn));
  t->dtype = static_cast<ncclDataType_t>(dtype);
  if (reduces) {
    if (op < 0) return fail(ncclInvalidArgument, "%s: invalid reduction operator %d", fn, op);
    CHORUS_CHECK(t->comm->redops.resolve(static_cast<ncclRedOp_t>(op), t->dtype, t->comm->id.nranks, &t->spec));
  } else {
    t->spec.type = t->dtype;
    t->spec.kind = ReduceKind::Sum;
  }
  return ncclSuccess;
}

// Every byte count the call implies fits (before anything is allocated): the
// per-rank buffer, and the nranks-times larger one of gather-type calls.
ncclResult_t checkSizes(const Task& t, const char* fn) {
  const size_t n = static_cast<size_t>(t.comm->id.nranks);
  const int dtype = static_cast<int>(t.dtype);
  switch (t.type) {
    case CollType::AllGather:
    case CollType::Gather:
      return checkBufferBytes(t.count, n, dtype, fn, "recvbuff");
    case CollType::ReduceScatter:
    case CollType::Scatter:
      return checkBufferBytes(t.count, n, dtype, fn, "sendbuff");
    case CollType::AlltoAll:
      return checkBufferBytes(t.count, n, dtype, fn, "sendbuff and recvbuff");
    default:
      return checkBufferBytes(t.count, 1, dtype, fn, "the buffer");
  }
}

// How a reduction travels: the environment's knobs (plain calls), or the
// caller's chorusReduceConfig_t (the Ex calls; NULL there means the default).
struct WireChoice {
  bool explicitConfig = false;
  const chorusReduceConfig_t* config = nullptr;
};

// Runs one call; errors inside a group also fail the group's ncclGroupEnd.
ncclResult_t submit(Task& t, const char* fn, bool reduces, int dtype, int op,
                    ncclResult_t (*extra)(const Task&, const char*), WireChoice wire = {}) {
  ncclResult_t res = prepare(&t, fn, reduces, dtype, op);
  if (res == ncclSuccess && reduces) res = configureWire(&t, wire.explicitConfig, wire.config, fn);
  // A plain average of floating-point values as NCCL computes it; the
  // deterministic and compressed forms keep their own (docs/wire.md).
  if (res == ncclSuccess && reduces && !t.wire.active())
    t.comm->redops.averageByPreMultiply(t.comm->id.nranks, &t.spec);
  if (res == ncclSuccess) res = checkSizes(t, fn);
  if (res == ncclSuccess && extra) res = extra(t, fn);
  if (res == ncclSuccess) res = enqueueTask(t);
  if (res != ncclSuccess) groupRecordError(res);
  return res;
}

ncclResult_t buffersBoth(const Task& t, const char* fn) {
  const int n = t.comm->id.nranks;
  const bool blocked = t.type == CollType::AllGather || t.type == CollType::AlltoAll;
  const bool sendBlocked = t.type == CollType::ReduceScatter || t.type == CollType::AlltoAll;
  CHORUS_CHECK(checkBuffer(t.sendbuff, sendBlocked ? t.count * n : t.count, fn, "sendbuff"));
  return checkBuffer(t.recvbuff, blocked ? t.count * n : t.count, fn, "recvbuff");
}

// The Ex calls: the buffers, and a residual of one float per input element
// that overlaps neither buffer.
ncclResult_t buffersAndResidual(const Task& t, const char* fn) {
  CHORUS_CHECK(buffersBoth(t, fn));
  if (t.wire.residual == nullptr) return ncclSuccess;
  const size_t n = t.type == CollType::ReduceScatter ? t.count * static_cast<size_t>(t.comm->id.nranks) : t.count;
  const auto* r = reinterpret_cast<const char*>(t.wire.residual);
  const size_t rBytes = n * sizeof(float);
  auto overlaps = [&](const void* b, size_t bytes) {
    const auto* p = static_cast<const char*>(b);
    return p != nullptr && r < p + bytes && p < r + rBytes;
  };
  const size_t esz = typeSize(t.dtype);
  const size_t outN = t.type == CollType::ReduceScatter ? t.count : n;
  if (n > 0 && (overlaps(t.sendbuff, n * esz) || overlaps(t.recvbuff, outN * esz)))
    return fail(ncclInvalidArgument, "%s: residual overlaps sendbuff or recvbuff", fn);
  return ncclSuccess;
}

ncclResult_t rootedBuffers(const Task& t, const char* fn) {
  const int n = t.comm->id.nranks;
  CHORUS_CHECK(checkRoot(t.root, n, fn));
  const bool atRoot = t.comm->id.rank == t.root;
  switch (t.type) {
    case CollType::Broadcast:
      if (atRoot) CHORUS_CHECK(checkBuffer(t.sendbuff, t.count, fn, "sendbuff"));
      return checkBuffer(t.recvbuff, t.count, fn, "recvbuff");
    case CollType::Reduce:
      CHORUS_CHECK(checkBuffer(t.sendbuff, t.count, fn, "sendbuff"));
      return atRoot ? checkBuffer(t.recvbuff, t.count, fn, "recvbuff") : ncclSuccess;
    case CollType::Gather:
      CHORUS_CHECK(checkBuffer(t.sendbuff, t.count, fn, "sendbuff"));
      return atRoot ? checkBuffer(t.recvbuff, t.count * n, fn, "recvbuff") : ncclSuccess;
    case CollType::Scatter:
      if (atRoot) CHORUS_CHECK(checkBuffer(t.sendbuff, t.count * n, fn, "sendbuff"));
      return checkBuffer(t.recvbuff, t.count, fn, "recvbuff");
    default:
      return ncclSuccess;
  }
}

ncclResult_t peerBuffer(const Task& t, const char* fn) {
  CHORUS_CHECK(checkRoot(t.root, t.comm->id.nranks, fn, "peer"));
  return checkBuffer(t.type == CollType::Send ? t.sendbuff : t.recvbuff, t.count, fn,
                     t.type == CollType::Send ? "sendbuff" : "recvbuff");
}

// The datatype is filled in by prepare() once it is known to be valid.
Task makeTask(CollType type, const void* sendbuff, void* recvbuff, size_t count, int root, ncclComm_t comm) {
  Task t;
  t.type = type;
  t.sendbuff = sendbuff;
  t.recvbuff = recvbuff;
  t.count = count;
  t.root = root;
  t.comm = comm;
  return t;
}

}  // namespace

CHORUS_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                         ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) try {
  Task t = makeTask(CollType::AllReduce, sendbuff, recvbuff, count, 0, comm);
  t.stream = stream;
  return submit(t, "ncclAllReduce", true, enumValue(datatype), enumValue(op), buffersBoth);
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclAllReduce)

CHORUS_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                             ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                             cudaStream_t stream) try {
  Task t = makeTask(CollType::ReduceScatter, sendbuff, recvbuff, recvcount, 0, comm);
  t.stream = stream;
  return submit(t, "ncclReduceScatter", true, enumValue(datatype), enumValue(op), buffersBoth);
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclReduceScatter)

CHORUS_EXPORT ncclResult_t chorusAllReduceEx(const void* sendbuff, void* recvbuff, size_t count,
                                             ncclDataType_t datatype, ncclRedOp_t op,
                                             const chorusReduceConfig_t* config, ncclComm_t comm,
                                             cudaStream_t stream) try {
  Task t = makeTask(CollType::AllReduce, sendbuff, recvbuff, count, 0, comm);
  t.stream = stream;
  return submit(t, "chorusAllReduceEx", true, enumValue(datatype), enumValue(op), buffersAndResidual,
                WireChoice{true, config});
}
CHORUS_API_CATCH

CHORUS_EXPORT ncclResult_t chorusReduceScatterEx(const void* sendbuff, void* recvbuff, size_t recvcount,
                                                 ncclDataType_t datatype, ncclRedOp_t op,
                                                 const chorusReduceConfig_t* config, ncclComm_t comm,
                                                 cudaStream_t stream) try {
  Task t = makeTask(CollType::ReduceScatter, sendbuff, recvbuff, recvcount, 0, comm);
  t.stream = stream;
  return submit(t, "chorusReduceScatterEx", true, enumValue(datatype), enumValue(op), buffersAndResidual,
                WireChoice{true, config});
}
CHORUS_API_CATCH

CHORUS_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) try {
  Task t = makeTask(CollType::AllGather, sendbuff, recvbuff, sendcount, 0, comm);
  t.stream = stream;
  return submit(t, "ncclAllGather", false, enumValue(datatype), 0, buffersBoth);
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclAllGather)

CHORUS_EXPORT ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                        ncclComm_t comm, cudaStream_t stream) try {
  Task t = makeTask(CollType::AlltoAll, sendbuff, recvbuff, count, 0, comm);
  t.stream = stream;
  return submit(t, "ncclAlltoAll", false, enumValue(datatype), 0, buffersBoth);
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclAlltoAll)

CHORUS_EXPORT ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) try {
  Task t = makeTask(CollType::Reduce, sendbuff, recvbuff, count, root, comm);
  t.stream = stream;
  return submit(t, "ncclReduce", true, enumValue(datatype), enumValue(op), rootedBuffers);
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclReduce)

CHORUS_EXPORT ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                         int root, ncclComm_t comm, cudaStream_t stream) try {
  Task t = makeTask(CollType::Broadcast, sendbuff, recvbuff, count, root, comm);
  t.stream = stream;
  return submit(t, "ncclBroadcast", false, enumValue(datatype), 0, rootedBuffers);
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclBroadcast)

CHORUS_EXPORT ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                     cudaStream_t stream) try {
  Task t = makeTask(CollType::Broadcast, buff, buff, count, root, comm);
  t.stream = stream;
  return submit(t, "ncclBcast", false, enumValue(datatype), 0, rootedBuffers);
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclBcast)

CHORUS_EXPORT ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      int root, ncclComm_t comm, cudaStream_t stream) try {
  Task t = makeTask(CollType::Gather, sendbuff, recvbuff, count, root, comm);
  t.stream = stream;
  return submit(t, "ncclGather", false, enumValue(datatype), 0, rootedBuffers);
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclGather)

CHORUS_EXPORT ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       int root, ncclComm_t comm, cudaStream_t stream) try {
  Task t = makeTask(CollType::Scatter, sendbuff, recvbuff, count, root, comm);
  t.stream = stream;
  return submit(t, "ncclScatter", false, enumValue(datatype), 0, rootedBuffers);
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclScatter)

CHORUS_EXPORT ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                    ncclComm_t comm, cudaStream_t stream) try {
  Task t = makeTask(CollType::Send, sendbuff, nullptr, count, peer, comm);
  t.stream = stream;
  return submit(t, "ncclSend", false, enumValue(datatype), 0, peerBuffer);
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclSend)

CHORUS_EXPORT ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                    cudaStream_t stream) try {
  Task t = makeTask(CollType::Recv, nullptr, recvbuff, count, peer, comm);
  t.stream = stream;
  return submit(t, "ncclRecv", false, enumValue(datatype), 0, peerBuffer);
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclRecv)
