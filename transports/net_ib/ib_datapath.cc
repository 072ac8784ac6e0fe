// Data path of the verbs backend. A receive posts a receive WR (to catch the
// immediate) and RDMA-writes the buffer's descriptor into the sender's FIFO
// slot; a send waits for its slot's descriptor, then RDMA-writes the payload
// WITH IMMEDIATE (the byte count) straight into that buffer. Completions are
// polled from test(); requests finish in order (IbRequestRing).
#include "transports/net_ib/ib_comm.h"

#include "core/result.h"
#include "transports/net_ib/ib_comm_state.h"

#ifdef CHORUS_HAVE_IBVERBS
#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cstring>

namespace chorus::ib {
namespace {

constexpr int kPollBatch = 16;

ncclResult_t postFailed(const char* what, int err) {
  return fail(ncclSystemError, "NET/IB: %s failed: %s", what, strerror(err));
}

bool peerSocketClosed(IbComm* comm) {
  pollfd p{comm->sock.get(), POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  char byte;
  return recv(comm->sock.get(), &byte, 1, MSG_DONTWAIT | MSG_PEEK) == 0 || (p.revents & (POLLHUP | POLLERR)) != 0;
}

ncclResult_t registerMr(IbComm* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  if (comm == nullptr || mhandle == nullptr) return fail(ncclInvalidArgument, "NET/IB: regMr: NULL argument");
  const VerbsApi* api = verbsApi();
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (type != CHORUS_NET_PTR_HOST && (comm->dev->ptrSupport & type) == 0)
    return fail(ncclInvalidArgument, "NET/IB: %s cannot register memory type %d (GPUDirect unavailable or disabled)",
                comm->dev->name.c_str(), type);
  ibv_mr* mr = type == CHORUS_NET_PTR_DMABUF
                   ? api->regDmabufMr(comm->dev->pd, offset, size, reinterpret_cast<uintptr_t>(data), fd, access)
                   : api->regMr(comm->dev->pd, data, size, access);
  if (mr == nullptr)
    return fail(ncclSystemError, "NET/IB: registering %zu bytes (type %d) on %s failed: %s", size, type,
                comm->dev->name.c_str(), strerror(errno));
  *mhandle = new IbMemHandle{mr, type};
  return ncclSuccess;
}

void fileCompletion(IbComm* comm, const ibv_wc& wc) {
  if (wc.wr_id & kWrFifoWrite) return;  // descriptor write landed
  if (wc.wr_id & kWrFlush) {
    comm->flushDone = true;
    return;
  }
  int index = static_cast<int>(wc.wr_id & 0xffffffffu);
  size_t bytes = comm->isSend ? comm->postedBytes[index] : ntohl(wc.imm_data);
  comm->ring.finish(index, bytes);
}

}  // namespace

ncclResult_t pollCompletions(IbComm* comm) {
  if (comm->failed) return fail(ncclRemoteError, "NET/IB: connection on %s already failed", comm->dev->name.c_str());
  ibv_wc wcs[kPollBatch];
  int n = ibv_poll_cq(comm->cq, kPollBatch, wcs);
  if (n < 0) return postFailed("ibv_poll_cq", EIO);
  for (int i = 0; i < n; ++i) {
    if (wcs[i].status != IBV_WC_SUCCESS) {
      comm->failed = true;
      return fail(ncclRemoteError, "NET/IB: work request on %s failed with status %d (vendor error %u); peer gone?",
                  comm->dev->name.c_str(), static_cast<int>(wcs[i].status), wcs[i].vendor_err);
    }
    fileCompletion(comm, wcs[i]);
  }
  if (n == 0 && peerSocketClosed(comm)) {
    comm->failed = true;
    return fail(ncclRemoteError, "NET/IB: peer of the connection on %s closed it", comm->dev->name.c_str());
  }
  return ncclSuccess;
}

ncclResult_t ibRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return registerMr(static_cast<IbComm*>(comm), data, size, type, 0, -1, mhandle);
}

ncclResult_t ibRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  if (verbsApi()->regDmabufMr == nullptr)
    return fail(ncclInvalidUsage, "NET/IB: this libibverbs has no ibv_reg_dmabuf_mr");
  return registerMr(static_cast<IbComm*>(comm), data, size, CHORUS_NET_PTR_DMABUF, offset, fd, mhandle);
}

ncclResult_t ibDeregMr(void* comm, void* mhandle) {
  auto* mh = static_cast<IbMemHandle*>(mhandle);
  if (mh == nullptr) return fail(ncclInvalidArgument, "NET/IB: deregMr: NULL handle");
  int err = verbsApi()->deregMr(mh->mr);
  delete mh;
  return err == 0 ? ncclSuccess : postFailed("ibv_dereg_mr", err);
}

ncclResult_t ibIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  auto* comm = static_cast<IbComm*>(sendComm);
  auto* mh = static_cast<IbMemHandle*>(mhandle);
  if (comm == nullptr || request == nullptr || !comm->isSend)
    return fail(ncclInvalidUsage, "NET/IB: isend needs a send connection and a request pointer");
  *request = nullptr;
  if (mh == nullptr && size > 0)
    return fail(ncclInvalidUsage, "NET/IB: isend of %zu bytes without a memory handle", size);
  CHORUS_CHECK(pollCompletions(comm));
  uint64_t seq = comm->ring.nextSeq();
  volatile IbFifoEntry* slot = &comm->fifo[seq % kIbSlots];
  if (comm->ring.outstanding() >= kIbSlots || slot->seqPlusOne != static_cast<uint32_t>(seq + 1)) return ncclSuccess;
  std::atomic_thread_fence(std::memory_order_acquire);  // descriptor fields after its sequence number
  if (slot->tag != tag)
    return fail(ncclInvalidUsage, "NET/IB: send with tag %d meets a receive posted with tag %d", tag, slot->tag);
  if (size > slot->size)
    return fail(ncclInvalidUsage, "NET/IB: send of %zu bytes into a receive of %u bytes", size, slot->size);
  int index = comm->ring.post();
  comm->postedBytes[index] = size;
  ibv_sge sge{reinterpret_cast<uintptr_t>(data), static_cast<uint32_t>(size), mh != nullptr ? mh->mr->lkey : 0};
  ibv_send_wr wr{};
  wr.wr_id = static_cast<uint64_t>(index);
  wr.sg_list = size > 0 ? &sge : nullptr;
  wr.num_sge = size > 0 ? 1 : 0;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(static_cast<uint32_t>(size));
  wr.wr.rdma.remote_addr = slot->addr;
  wr.wr.rdma.rkey = slot->rkey;
  ibv_send_wr* bad = nullptr;
  int err = ibv_post_send(comm->qp.qp, &wr, &bad);
  if (err != 0) return postFailed("posting an RDMA write", err);
  comm->handles[index] = IbRequestHandle{comm, index};
  *request = &comm->handles[index];
  return ncclSuccess;
}

ncclResult_t ibIrecv(void* recvComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  auto* comm = static_cast<IbComm*>(recvComm);
  auto* mh = static_cast<IbMemHandle*>(mhandle);
  if (comm == nullptr || request == nullptr || comm->isSend)
    return fail(ncclInvalidUsage, "NET/IB: irecv needs a receive connection and a request pointer");
  *request = nullptr;
  if (mh == nullptr && size > 0)
    return fail(ncclInvalidUsage, "NET/IB: irecv of %zu bytes without a memory handle", size);
  if (size > UINT32_MAX) return fail(ncclInvalidArgument, "NET/IB: receive of %zu bytes is too large", size);
  CHORUS_CHECK(pollCompletions(comm));
  uint64_t seq = 0;
  int index = comm->ring.post(&seq);
  if (index < 0) return ncclSuccess;
  ibv_recv_wr rwr{};
  rwr.wr_id = static_cast<uint64_t>(index);
  ibv_recv_wr* badRecv = nullptr;
  int err = ibv_post_recv(comm->qp.qp, &rwr, &badRecv);
  if (err != 0) return postFailed("posting a receive", err);
  IbFifoEntry& entry = comm->staging[index];
  entry = IbFifoEntry{reinterpret_cast<uintptr_t>(data), mh != nullptr ? mh->mr->rkey : 0, static_cast<uint32_t>(size),
                      tag, static_cast<uint32_t>(seq + 1)};
  ibv_sge sge{reinterpret_cast<uintptr_t>(&entry), sizeof(IbFifoEntry), comm->stagingMr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kWrFifoWrite | static_cast<uint64_t>(index);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  wr.wr.rdma.remote_addr = comm->remoteFifoAddr + static_cast<uint64_t>(index) * sizeof(IbFifoEntry);
  wr.wr.rdma.rkey = comm->remoteFifoRkey;
  ibv_send_wr* bad = nullptr;
  if ((err = ibv_post_send(comm->qp.qp, &wr, &bad)) != 0) return postFailed("posting a FIFO write", err);
  comm->handles[index] = IbRequestHandle{comm, index};
  *request = &comm->handles[index];
  return ncclSuccess;
}

ncclResult_t ibIflush(void* recvComm, void* data, size_t size, void* mhandle, void** request) {
  auto* comm = static_cast<IbComm*>(recvComm);
  auto* mh = static_cast<IbMemHandle*>(mhandle);
  if (comm == nullptr || request == nullptr) return fail(ncclInvalidArgument, "NET/IB: iflush: NULL argument");
  *request = nullptr;
  if (mh == nullptr || mh->type == CHORUS_NET_PTR_HOST || size == 0) return ncclSuccess;  // nothing to flush
  // One flush read in flight at a time, and a NULL request means "nothing to
  // flush" to every caller: a new flush first waits for the one in flight (a
  // loopback read, microseconds). Its handle is reused, so a caller still
  // holding the old one sees it done only when the new read is, which is
  // later.
  while (comm->flushPending && !comm->flushDone) CHORUS_CHECK(pollCompletions(comm));
  // A read through the NIC completes only after earlier writes into the
  // buffer are visible to the GPU.
  ibv_sge sge{reinterpret_cast<uintptr_t>(comm->flushBuf), 1, comm->flushMr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kWrFlush;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(data);
  wr.wr.rdma.rkey = mh->mr->rkey;
  ibv_send_wr* bad = nullptr;
  int err = ibv_post_send(comm->flushQp.qp, &wr, &bad);
  if (err != 0) return postFailed("posting a flush read", err);
  comm->flushPending = true;
  comm->flushDone = false;
  comm->flushHandle = IbRequestHandle{comm, -1};
  *request = &comm->flushHandle;
  return ncclSuccess;
}

ncclResult_t ibTest(void* request, int* done, size_t* size) {
  auto* handle = static_cast<IbRequestHandle*>(request);
  if (handle == nullptr || handle->comm == nullptr || done == nullptr)
    return fail(ncclInvalidArgument, "NET/IB: test: invalid request");
  *done = 0;
  IbComm* comm = handle->comm;
  CHORUS_CHECK(pollCompletions(comm));
  if (handle->index < 0) {
    if (!comm->flushDone) return ncclSuccess;
    comm->flushPending = false;
    *done = 1;
    if (size != nullptr) *size = 0;
    return ncclSuccess;
  }
  size_t bytes = 0;
  if (!comm->ring.tryReport(handle->index, &bytes)) return ncclSuccess;
  *done = 1;
  if (size != nullptr) *size = bytes;
  return ncclSuccess;
}

}  // namespace chorus::ib

#else  // !CHORUS_HAVE_IBVERBS

namespace chorus::ib {
namespace {
ncclResult_t unavailable() { return fail(ncclInvalidUsage, "NET/IB: built without InfiniBand verbs support"); }
}  // namespace
ncclResult_t ibRegMr(void*, void*, size_t, int, void**) { return unavailable(); }
ncclResult_t ibRegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) { return unavailable(); }
ncclResult_t ibDeregMr(void*, void*) { return unavailable(); }
ncclResult_t ibIsend(void*, void*, size_t, int, void*, void**) { return unavailable(); }
ncclResult_t ibIrecv(void*, void*, size_t, int, void*, void**) { return unavailable(); }
ncclResult_t ibIflush(void*, void*, size_t, void*, void**) { return unavailable(); }
ncclResult_t ibTest(void*, int*, size_t*) { return unavailable(); }
}  // namespace chorus::ib

#endif  // CHORUS_HAVE_IBVERBS
