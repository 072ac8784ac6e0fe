// Internal state of verbs connections, shared by ib_setup.cc (bring-up and
// teardown) and ib_datapath.cc (posting and completion).
#pragma once

#ifdef CHORUS_HAVE_IBVERBS
#include <cstdint>

#include "bootstrap/socket.h"
#include "transports/net_ib/ib_devices.h"
#include "transports/net_ib/ib_knobs.h"
#include "transports/net_ib/ib_qp.h"
#include "transports/net_ib/ib_request_ring.h"

namespace chorus::ib {

// One posted receive buffer, as the receiver announces it in the sender's
// FIFO. `seqPlusOne` is written last by the receiver's NIC and tells the
// sender the entry is for the message it is about to send (entries are
// reused every kIbSlots messages).
struct IbFifoEntry {
  uint64_t addr;
  uint32_t rkey;
  uint32_t size;
  int32_t tag;
  uint32_t seqPlusOne;
};
static_assert(sizeof(IbFifoEntry) == 24);

// Work-request ids: low bits the ring index; these flags mark the rest.
constexpr uint64_t kWrFifoWrite = 1ull << 32;
constexpr uint64_t kWrFlush = 1ull << 33;

struct IbComm;
struct IbRequestHandle {
  IbComm* comm = nullptr;
  int index = -1;  // ring index; -1: the flush request
};

struct IbComm {
  bool isSend = false;
  const IbDevice* dev = nullptr;
  ForkClosedFd sock;  // setup socket, kept open: EOF means the peer is gone
  ibv_cq* cq = nullptr;
  IbQp qp;
  IbRequestRing ring;
  IbRequestHandle handles[kIbSlots];
  size_t postedBytes[kIbSlots] = {};
  bool failed = false;
  // Sender: the FIFO the receiver writes into.
  IbFifoEntry* fifo = nullptr;
  ibv_mr* fifoMr = nullptr;
  // Receiver: where the sender's FIFO is, and the staging copies we write from.
  uint64_t remoteFifoAddr = 0;
  uint32_t remoteFifoRkey = 0;
  IbFifoEntry* staging = nullptr;
  ibv_mr* stagingMr = nullptr;
  // Receiver: loopback QP for GPUDirect flush reads.
  IbQp flushQp;
  uint8_t* flushBuf = nullptr;
  ibv_mr* flushMr = nullptr;
  bool flushPending = false;
  bool flushDone = false;
  IbRequestHandle flushHandle;
};

struct IbMemHandle {
  ibv_mr* mr = nullptr;
  int type = 0;
};

// Polls comm's CQ once and files completions. ncclRemoteError when a work
// request failed or the setup socket reports the peer gone.
ncclResult_t pollCompletions(IbComm* comm);
// Frees every verbs resource of comm, then comm.
void destroyComm(IbComm* comm);

}  // namespace chorus::ib
#endif  // CHORUS_HAVE_IBVERBS
