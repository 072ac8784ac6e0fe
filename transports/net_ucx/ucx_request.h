// The data path of the UCX backend: tagged sends and receives on the shared
// worker, completion in posting order per connection, and the (registration
// free) memory handles. Nothing here uses UCX callbacks: requests are polled
// from test(), so a request can be dropped at any time without a callback
// writing into freed memory later.
#pragma once

#include <cstddef>

#include "nccl.h"
#include "transports/net_ucx/ucx_comm.h"

namespace chorus::ucx {

struct UcxRequest {
  UcxConn* conn = nullptr;
  void* ucpReq = nullptr;  // NULL once UCX finished with it
  bool isRecv = false;
  bool complete = false;
  ucs_status_t status = UCS_OK;
  size_t bytes = 0;  // posted size; for a finished receive, the received size
};

// Teardown of a connection's requests; the caller holds conn->w->mu.
// Asks UCX to cancel the receives still posted. One that already matched a
// message is not cancelled: UCX keeps writing into its buffer until the
// message is complete (or the endpoint fails).
void cancelReceives(UcxConn* conn);
// Polls the receives; true once UCX is done with every one of them.
bool receivesSettled(UcxConn* conn);
// Cancels and frees every request still posted on conn (a send still in
// progress is released by UCX when it completes or its endpoint closes).
void dropInflight(UcxConn* conn);

ncclResult_t ucxRegMr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t ucxDeregMr(void* comm, void* mhandle);
ncclResult_t ucxIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
ncclResult_t ucxIrecv(void* recvComm, void* data, size_t size, int tag, void* mhandle, void** request);
ncclResult_t ucxIflush(void* recvComm, void* data, size_t size, void* mhandle, void** request);
ncclResult_t ucxTest(void* request, int* done, size_t* size);

}  // namespace chorus::ucx
