#include "transports/net_ucx/ucx_request.h"

#include <algorithm>

#include "chorus/net_plugin.h"
#include "core/result.h"

namespace chorus::ucx {
namespace {

// Requests one connection may have posted before isend/irecv answer "not yet".
constexpr size_t kMaxInflight = 1024;
constexpr uint32_t kMhandleMagic = 0x55434d48;  // "UCMH"

// UCX needs no registration; the handle remembers the memory type so that
// requests can pass it as a hint and UCX skips its own detection.
struct UcxMemHandle {
  uint32_t magic = kMhandleMagic;
  int type = CHORUS_NET_PTR_HOST;
};

void setMemoryType(void* mhandle, ucp_request_param_t* param) {
  auto* mh = static_cast<UcxMemHandle*>(mhandle);
  if (mh == nullptr || mh->magic != kMhandleMagic) return;
  param->op_attr_mask |= UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  param->memory_type = mh->type == CHORUS_NET_PTR_HOST ? UCS_MEMORY_TYPE_HOST : UCS_MEMORY_TYPE_CUDA;
}

ncclResult_t checkPostable(UcxConn* conn, bool wantSend, void** request, const char* what) {
  if (conn == nullptr || request == nullptr) return fail(ncclInvalidArgument, "NET/UCX: %s: NULL argument", what);
  *request = nullptr;
  if (conn->isSend != wantSend)
    return fail(ncclInvalidUsage, "NET/UCX: %s on a %s connection", what, conn->isSend ? "send" : "receive");
  return ncclSuccess;
}

// Files a posted operation: `ret` is what the *_nbx call returned.
ncclResult_t enqueue(UcxConn* conn, ucs_status_ptr_t ret, bool isRecv, size_t bytes, size_t immediateBytes,
                     void** request) {
  if (UCS_PTR_IS_ERR(ret))
    return fail(conn->failed ? ncclRemoteError : ncclSystemError, "NET/UCX: posting a %s on connection %u failed: %s",
                isRecv ? "receive" : "send", conn->connId, conn->w->api->statusString(UCS_PTR_STATUS(ret)));
  auto* req = new UcxRequest;
  req->conn = conn;
  req->isRecv = isRecv;
  req->bytes = bytes;
  if (ret == nullptr) {
    req->complete = true;
    req->bytes = immediateBytes;
  } else {
    req->ucpReq = ret;
  }
  conn->inflight.push_back(req);
  *request = req;
  return ncclSuccess;
}

// Polls UCX for one request; true once it finished.
bool poll(const UcpApi* api, UcxRequest* req) {
  if (req->complete) return true;
  ucp_tag_recv_info_t info{};
  req->status = req->isRecv ? api->tagRecvRequestTest(req->ucpReq, &info) : api->requestCheckStatus(req->ucpReq);
  if (req->status == UCS_INPROGRESS) return false;
  if (req->isRecv && req->status == UCS_OK) req->bytes = info.length;
  api->requestFree(req->ucpReq);
  req->ucpReq = nullptr;
  req->complete = true;
  return true;
}

void dropRequest(UcxRequest* req) {
  UcxConn* conn = req->conn;
  if (req->ucpReq != nullptr) {
    conn->w->api->requestCancel(conn->w->worker, req->ucpReq);
    conn->w->api->requestFree(req->ucpReq);
  }
  conn->inflight.erase(std::find(conn->inflight.begin(), conn->inflight.end(), req));
  delete req;
}

ncclResult_t requestError(UcxRequest* req, ucs_status_t status) {
  UcxConn* conn = req->conn;
  const char* what = req->isRecv ? "receive" : "send";
  dropRequest(req);
  if (status == UCS_ERR_MESSAGE_TRUNCATED)
    return fail(ncclInvalidUsage, "NET/UCX: a message on connection %u is larger than the posted receive",
                conn->connId);
  // Logged at INFO: UCX cannot tell a peer that closed in order from one that
  // died, and receives are always posted, so every normal teardown ends here.
  // The executor reports it (as a WARN) only when a waiting operation needs it.
  return failQuiet(ncclRemoteError, kLogNet, "NET/UCX: %s on connection %u failed, peer gone? (%s)", what, conn->connId,
                   conn->w->api->statusString(status != UCS_OK ? status : conn->failStatus));
}

}  // namespace

void cancelReceives(UcxConn* conn) {
  for (UcxRequest* r : conn->inflight)
    if (r->isRecv && r->ucpReq != nullptr) conn->w->api->requestCancel(conn->w->worker, r->ucpReq);
}

bool receivesSettled(UcxConn* conn) {
  bool settled = true;
  for (UcxRequest* r : conn->inflight)
    if (r->isRecv && !poll(conn->w->api, r)) settled = false;
  return settled;
}

void dropInflight(UcxConn* conn) {
  while (!conn->inflight.empty()) dropRequest(conn->inflight.front());
}

ncclResult_t ucxRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (mhandle == nullptr) return fail(ncclInvalidArgument, "NET/UCX: regMr: NULL mhandle");
  if (type != CHORUS_NET_PTR_HOST && type != CHORUS_NET_PTR_CUDA)
    return fail(ncclInvalidArgument, "NET/UCX: regMr: unsupported memory type %d", type);
  auto* mh = new UcxMemHandle;
  mh->type = type;
  *mhandle = mh;
  return ncclSuccess;
}

ncclResult_t ucxDeregMr(void* comm, void* mhandle) {
  auto* mh = static_cast<UcxMemHandle*>(mhandle);
  if (mh == nullptr || mh->magic != kMhandleMagic)
    return fail(ncclInvalidArgument, "NET/UCX: deregMr: not a UCX memory handle");
  mh->magic = 0;
  delete mh;
  return ncclSuccess;
}

ncclResult_t ucxIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  auto* conn = static_cast<UcxConn*>(sendComm);
  CHORUS_CHECK(checkPostable(conn, true, request, "isend"));
  std::lock_guard<std::mutex> lock(conn->w->mu);
  if (conn->failed)
    return fail(ncclRemoteError, "NET/UCX: send on connection %u: peer gone (%s)", conn->connId,
                conn->w->api->statusString(conn->failStatus));
  conn->w->progress();
  if (conn->inflight.size() >= kMaxInflight) return ncclSuccess;
  ucp_request_param_t param{};
  setMemoryType(mhandle, &param);
  ucs_status_ptr_t ret = conn->w->api->tagSendNbx(conn->ep, data, size, dataTag(conn->connId, tag), &param);
  return enqueue(conn, ret, false, size, size, request);
}

ncclResult_t ucxIrecv(void* recvComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  auto* conn = static_cast<UcxConn*>(recvComm);
  CHORUS_CHECK(checkPostable(conn, false, request, "irecv"));
  std::lock_guard<std::mutex> lock(conn->w->mu);
  conn->w->progress();
  if (conn->inflight.size() >= kMaxInflight) return ncclSuccess;
  // Posted even when the sender is gone: what it sent before leaving is
  // still queued in the worker and matches.
  // No immediate completion: UCX 1.13 does not report the received length
  // through recv_info when a receive matches an already-arrived message, so
  // every receive gets a request and its length comes from the request test.
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  setMemoryType(mhandle, &param);
  ucs_status_ptr_t ret =
      conn->w->api->tagRecvNbx(conn->w->worker, data, size, dataTag(conn->connId, tag), ~ucp_tag_t{0}, &param);
  return enqueue(conn, ret, true, size, 0, request);
}

ncclResult_t ucxIflush(void* recvComm, void* data, size_t size, void* mhandle, void** request) {
  if (request == nullptr) return fail(ncclInvalidArgument, "NET/UCX: iflush: NULL request");
  *request = nullptr;  // only host memory is received into (ucxDeviceProperties): nothing to flush
  return ncclSuccess;
}

ncclResult_t ucxTest(void* request, int* done, size_t* size) {
  auto* req = static_cast<UcxRequest*>(request);
  if (req == nullptr || done == nullptr) return fail(ncclInvalidArgument, "NET/UCX: test: NULL argument");
  *done = 0;
  UcxConn* conn = req->conn;
  std::lock_guard<std::mutex> lock(conn->w->mu);
  conn->w->progress();
  // In-order completion: this request is done once it and every request
  // posted before it on the connection finished.
  for (UcxRequest* r : conn->inflight) {
    if (!poll(conn->w->api, r)) {
      if (conn->failed) return requestError(req, UCS_OK);
      return ncclSuccess;
    }
    if (r->status != UCS_OK) return requestError(req, r->status);
    if (r == req) break;
  }
  *done = 1;
  if (size != nullptr) *size = req->bytes;
  conn->inflight.erase(std::find(conn->inflight.begin(), conn->inflight.end(), req));
  delete req;
  return ncclSuccess;
}

}  // namespace chorus::ucx
