// Connection objects of the UCX backend and the entries that create and
// close them. A UcxConn is one direction of one connection: the sender's end
// (a client endpoint) or the receiver's end (an endpoint accepted by a
// listener). Both ends know the receiver-assigned connection id that the data
// tags carry (see ucx_wire.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>

#include "nccl.h"
#include "transports/net_ucx/ucx_wire.h"
#include "transports/net_ucx/ucx_worker.h"

namespace chorus::ucx {

struct UcxRequest;

struct UcxConn {
  UcxWorker* w = nullptr;
  ucp_ep_h ep = nullptr;
  uint32_t connId = 0;
  bool isSend = false;
  // Set by the endpoint's error handler (under w->mu): the peer is gone.
  bool failed = false;
  ucs_status_t failStatus = UCS_OK;
  // Posted and not yet returned as done, in posting order (under w->mu).
  std::deque<UcxRequest*> inflight;
};

ncclResult_t ucxListen(int dev, void* handle, void** listenComm);
ncclResult_t ucxConnect(int dev, const void* handle, void** sendComm);
ncclResult_t ucxAccept(void* listenComm, void** recvComm);
ncclResult_t ucxCloseSend(void* sendComm);
ncclResult_t ucxCloseRecv(void* recvComm);
ncclResult_t ucxCloseListen(void* listenComm);

// Creates an endpoint whose error handler marks `conn` failed. Caller holds
// conn->w->mu; params carries the address or the connection request.
ncclResult_t createEndpoint(UcxConn* conn, ucp_ep_params_t* params);
// Closes conn's endpoint (flush, or force when the peer is gone), waiting a
// bounded time, then frees conn. Caller does not hold the lock.
void destroyConn(UcxConn* conn);

}  // namespace chorus::ucx
