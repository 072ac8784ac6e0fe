// Connection setup of the UCX backend: listener, client endpoint, the
// Hello/Welcome handshake on the endpoint's stream, and teardown. Every step
// is a poll: listen/connect/accept return with a NULL comm until the
// handshake finished, and drive the shared worker while they are at it.
#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <random>

#include "core/log.h"
#include "core/params.h"
#include "core/wait_limit.h"
#include "core/result.h"
#include "transports/net_ucx/ucx_comm.h"
#include "transports/net_ucx/ucx_device.h"
#include "transports/net_ucx/ucx_request.h"

namespace chorus::ucx {
namespace {

using Clock = std::chrono::steady_clock;

// One handshake stream operation in flight: NULL when finished.
struct StreamOp {
  void* req = nullptr;
  bool posted = false;
  ucs_status_t status = UCS_OK;
};

// Records the outcome of a UCP call that returns a status pointer.
void startOp(StreamOp* op, ucs_status_ptr_t ret) {
  op->posted = true;
  if (UCS_PTR_IS_ERR(ret)) {
    op->status = UCS_PTR_STATUS(ret);
  } else if (ret != nullptr) {
    op->req = ret;
    op->status = UCS_INPROGRESS;
  }
}

// True once the operation finished (status then holds its outcome).
bool pollOp(const UcpApi* api, StreamOp* op) {
  if (op->req != nullptr) {
    op->status = api->requestCheckStatus(op->req);
    if (op->status == UCS_INPROGRESS) return false;
    api->requestFree(op->req);
    op->req = nullptr;
  }
  return op->posted;
}

void dropOp(UcxWorker* w, StreamOp* op) {
  if (op->req == nullptr) return;
  w->api->requestCancel(w->worker, op->req);
  w->api->requestFree(op->req);
  op->req = nullptr;
}

ucs_status_ptr_t streamSend(UcxConn* conn, const void* buf, size_t n) {
  ucp_request_param_t param{};
  return conn->w->api->streamSendNbx(conn->ep, buf, n, &param);
}

ucs_status_ptr_t streamRecv(UcxConn* conn, void* buf, size_t n, size_t* got) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_STREAM_RECV_FLAG_WAITALL;
  return conn->w->api->streamRecvNbx(conn->ep, buf, n, got, &param);
}

void onEndpointError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* conn = static_cast<UcxConn*>(arg);
  conn->failed = true;
  conn->failStatus = status;
}

int closeWaitMs() { return static_cast<int>(kCloseDrainMs); }

// ---- Listener -----------------------------------------------------------------

struct AcceptState {
  UcxConn* conn = nullptr;
  uint8_t hello[kHelloBytes] = {};
  size_t helloLen = 0;
  StreamOp helloRecv;
  uint8_t welcome[kWelcomeBytes] = {};
  StreamOp welcomeSend;
};

struct UcxListen {
  UcxWorker* w = nullptr;
  ucp_listener_h listener = nullptr;
  uint64_t listenId = 0;
  std::deque<ucp_conn_request_h> requests;  // under w->mu (filled by progress)
  std::unique_ptr<AcceptState> accepting;
};

void onConnRequest(ucp_conn_request_h request, void* arg) { static_cast<UcxListen*>(arg)->requests.push_back(request); }

uint64_t randomId() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

ncclResult_t startListener(UcxListen* l, const SockAddr& local, SockAddr* bound) {
  ucp_listener_params_t params{};
  params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  params.sockaddr.addr = local.sa();
  params.sockaddr.addrlen = local.len;
  params.conn_handler.cb = onConnRequest;
  params.conn_handler.arg = l;
  const UcpApi* api = l->w->api;
  ucs_status_t st = api->listenerCreate(l->w->worker, &params, &l->listener);
  if (st != UCS_OK)
    return fail(ncclSystemError, "NET/UCX: cannot listen on %s: %s", local.str().c_str(), api->statusString(st));
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  st = api->listenerQuery(l->listener, &attr);
  if (st != UCS_OK) return fail(ncclSystemError, "NET/UCX: ucp_listener_query: %s", api->statusString(st));
  *bound = local;
  std::memcpy(&bound->storage, &attr.sockaddr, std::min(sizeof(bound->storage), sizeof(attr.sockaddr)));
  return ncclSuccess;
}

// Takes the next connection request: endpoint plus a posted Hello receive.
ncclResult_t beginAccept(UcxListen* l) {
  auto state = std::make_unique<AcceptState>();
  state->conn = new UcxConn;
  state->conn->w = l->w;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST;
  params.conn_request = l->requests.front();
  l->requests.pop_front();
  ncclResult_t res = createEndpoint(state->conn, &params);
  if (res != ncclSuccess) {
    delete state->conn;
    return res;
  }
  startOp(&state->helloRecv, streamRecv(state->conn, state->hello, kHelloBytes, &state->helloLen));
  l->accepting = std::move(state);
  return ncclSuccess;
}

// Advances the accept in progress; *done once the Welcome went out.
ncclResult_t advanceAccept(UcxListen* l, bool* done) {
  AcceptState* s = l->accepting.get();
  const UcpApi* api = l->w->api;
  if (s->conn->failed)
    return fail(ncclRemoteError, "NET/UCX: connecting peer went away during accept: %s",
                api->statusString(s->conn->failStatus));
  if (!pollOp(api, &s->helloRecv)) return ncclSuccess;
  if (s->helloRecv.status != UCS_OK)
    return fail(ncclRemoteError, "NET/UCX: receiving a connection hello failed: %s",
                api->statusString(s->helloRecv.status));
  if (!s->welcomeSend.posted) {
    uint64_t listenId = 0;
    if (!decodeHello(s->hello, &listenId) || listenId != l->listenId)
      return fail(ncclRemoteError, "NET/UCX: a client connected with a hello for another listener");
    s->conn->connId = l->w->nextConnId();
    encodeWelcome(s->conn->connId, s->welcome);
    startOp(&s->welcomeSend, streamSend(s->conn, s->welcome, kWelcomeBytes));
  }
  if (!pollOp(api, &s->welcomeSend)) return ncclSuccess;
  if (s->welcomeSend.status != UCS_OK)
    return fail(ncclRemoteError, "NET/UCX: sending the connection welcome failed: %s",
                api->statusString(s->welcomeSend.status));
  *done = true;
  return ncclSuccess;
}

// ---- Client ----------------------------------------------------------------------

struct PendingConnect {
  UcxConn* conn = nullptr;
  uint8_t hello[kHelloBytes] = {};
  StreamOp helloSend;
  uint8_t welcome[kWelcomeBytes] = {};
  size_t welcomeLen = 0;
  StreamOp welcomeRecv;
  Clock::time_point deadline;
};

using HandleBytes = std::array<uint8_t, CHORUS_NET_HANDLE_BYTES>;

// The registry of connects in progress. connect() is retried with the same
// handle until it returns a comm, so attempts are keyed by the handle bytes.
struct PendingConnectRegistry {
  std::mutex mu;
  std::map<HandleBytes, std::unique_ptr<PendingConnect>> byHandle;
  static PendingConnectRegistry& get() {
    static auto* registry = new PendingConnectRegistry;  // never destroyed: no teardown-order hazard at exit
    return *registry;
  }
};

ncclResult_t beginConnect(const ListenHandle& target, std::unique_ptr<PendingConnect>* out) {
  auto pc = std::make_unique<PendingConnect>();
  UcxWorker* w = nullptr;
  CHORUS_CHECK(UcxWorkerRegistry::acquire(&w));
  pc->conn = new UcxConn;
  pc->conn->w = w;
  pc->conn->isSend = true;
  pc->deadline = deadlineAfterMs(kNetSetupBoundMs);
  ncclResult_t res;
  {
    std::lock_guard<std::mutex> lock(w->mu);
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
    params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    params.sockaddr.addr = target.addr.sa();
    params.sockaddr.addrlen = target.addr.len;
    res = createEndpoint(pc->conn, &params);
    if (res == ncclSuccess) {
      encodeHello(target.listenId, pc->hello);
      startOp(&pc->helloSend, streamSend(pc->conn, pc->hello, kHelloBytes));
      startOp(&pc->welcomeRecv, streamRecv(pc->conn, pc->welcome, kWelcomeBytes, &pc->welcomeLen));
    }
  }
  if (res != ncclSuccess) {
    delete pc->conn;
    UcxWorkerRegistry::release(w);
    return res;
  }
  *out = std::move(pc);
  return ncclSuccess;
}

// Advances a connect; *done once the Welcome arrived.
ncclResult_t advanceConnect(PendingConnect* pc, bool* done) {
  UcxConn* conn = pc->conn;
  const UcpApi* api = conn->w->api;
  std::lock_guard<std::mutex> lock(conn->w->mu);
  conn->w->progress();
  if (conn->failed)
    return fail(ncclRemoteError, "NET/UCX: connection to the listener failed: %s", api->statusString(conn->failStatus));
  bool sent = pollOp(api, &pc->helloSend);
  bool received = pollOp(api, &pc->welcomeRecv);
  if ((sent && pc->helloSend.status != UCS_OK) || (received && pc->welcomeRecv.status != UCS_OK))
    return fail(
        ncclRemoteError, "NET/UCX: connection handshake failed: %s",
        api->statusString(sent && pc->helloSend.status != UCS_OK ? pc->helloSend.status : pc->welcomeRecv.status));
  if (sent && received) {
    if (!decodeWelcome(pc->welcome, &conn->connId))
      return fail(ncclRemoteError, "NET/UCX: listener answered with a malformed welcome");
    *done = true;
    return ncclSuccess;
  }
  if (Clock::now() > pc->deadline)
    return fail(ncclRemoteError, "NET/UCX: no answer from the listener within %lld ms",
                static_cast<long long>(kNetSetupBoundMs));
  return ncclSuccess;
}

void abandonConnect(std::unique_ptr<PendingConnect> pc) {
  {
    std::lock_guard<std::mutex> lock(pc->conn->w->mu);
    dropOp(pc->conn->w, &pc->helloSend);
    dropOp(pc->conn->w, &pc->welcomeRecv);
  }
  destroyConn(pc->conn);
}

}  // namespace

ncclResult_t createEndpoint(UcxConn* conn, ucp_ep_params_t* params) {
  params->field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params->err_mode = UCP_ERR_HANDLING_MODE_PEER;  // a dead peer fails requests instead of hanging them
  params->err_handler.cb = onEndpointError;
  params->err_handler.arg = conn;
  ucs_status_t st = conn->w->api->epCreate(conn->w->worker, params, &conn->ep);
  if (st != UCS_OK) return fail(ncclSystemError, "NET/UCX: ucp_ep_create: %s", conn->w->api->statusString(st));
  return ncclSuccess;
}

// Progresses the worker until `done` or the deadline, letting other threads
// that share the worker in between rounds. Caller holds the lock.
template <typename Done>
bool progressUntil(UcxWorker* w, std::unique_lock<std::mutex>& lock, Clock::time_point deadline, Done done) {
  while (!done() && Clock::now() < deadline) {
    w->progress();
    lock.unlock();
    lock.lock();
  }
  return done();
}

void destroyConn(UcxConn* conn) {
  UcxWorker* w = conn->w;
  const UcpApi* api = w->api;
  std::unique_lock<std::mutex> lock(w->mu);
  // Requests still posted were abandoned by the caller: a flush would wait
  // for them (a large send waits for a receive that may never come), so the
  // endpoint is then closed by force, as it is when the peer is gone.
  bool force = conn->failed || !conn->inflight.empty();
  // The caller frees the receive buffers once we return, so receives must be
  // finished first: unmatched ones are cancelled at once, a matched one ends
  // when its message is complete.
  cancelReceives(conn);
  bool stuck = !progressUntil(w, lock, Clock::now() + std::chrono::milliseconds(closeWaitMs()),
                              [conn] { return receivesSettled(conn); });
  if (stuck)
    CHORUS_WARN(kLogNet, "NET/UCX: receives on connection %u did not end within %d ms of its close", conn->connId,
                closeWaitMs());
  dropInflight(conn);
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  ucs_status_ptr_t closing = conn->ep != nullptr ? api->epCloseNbx(conn->ep, &param) : nullptr;
  if (closing != nullptr && !UCS_PTR_IS_ERR(closing)) {
    const bool closed = progressUntil(w, lock, Clock::now() + std::chrono::milliseconds(closeWaitMs()),
                                      [&] { return api->requestCheckStatus(closing) != UCS_INPROGRESS; });
    if (!closed) {
      CHORUS_WARN(kLogNet, "NET/UCX: closing connection %u did not finish within %d ms", conn->connId, closeWaitMs());
      stuck = true;
    }
    api->requestFree(closing);
  }
  if (stuck) {
    // UCX still refers to this connection (the endpoint's error handler, a
    // request): the worker is never destroyed now and conn is kept with it.
    ++w->stuckCloses;
    lock.unlock();
    UcxWorkerRegistry::release(w);
    return;
  }
  lock.unlock();
  delete conn;
  UcxWorkerRegistry::release(w);
}

ncclResult_t ucxListen(int dev, void* handle, void** listenComm) {
  if (handle == nullptr || listenComm == nullptr) return fail(ncclInvalidArgument, "NET/UCX: listen: NULL argument");
  *listenComm = nullptr;
  SockAddr local;
  CHORUS_CHECK(ucxDeviceAddress(dev, &local));
  auto l = std::make_unique<UcxListen>();
  CHORUS_CHECK(UcxWorkerRegistry::acquire(&l->w));
  l->listenId = randomId();
  ListenHandle h;
  ncclResult_t res;
  {
    std::lock_guard<std::mutex> lock(l->w->mu);
    res = startListener(l.get(), local, &h.addr);
  }
  if (res != ncclSuccess) {
    UcxWorkerRegistry::release(l->w);
    return res;
  }
  h.listenId = l->listenId;
  encodeListenHandle(h, handle);
  CHORUS_INFO(kLogNet, "NET/UCX: listening on %s", h.addr.str().c_str());
  *listenComm = l.release();
  return ncclSuccess;
}

ncclResult_t ucxConnect(int dev, const void* handle, void** sendComm) {
  if (sendComm == nullptr) return fail(ncclInvalidArgument, "NET/UCX: connect: NULL sendComm");
  *sendComm = nullptr;
  ListenHandle target;
  CHORUS_CHECK(decodeListenHandle(handle, &target));
  HandleBytes key;
  std::memcpy(key.data(), handle, key.size());
  auto& registry = PendingConnectRegistry::get();
  std::unique_ptr<PendingConnect> pc;
  {
    std::lock_guard<std::mutex> lock(registry.mu);
    auto it = registry.byHandle.find(key);
    if (it != registry.byHandle.end()) {
      pc = std::move(it->second);
      registry.byHandle.erase(it);
    }
  }
  if (pc == nullptr) CHORUS_CHECK(beginConnect(target, &pc));
  bool done = false;
  ncclResult_t res = advanceConnect(pc.get(), &done);
  if (res != ncclSuccess) {
    abandonConnect(std::move(pc));
    return res;
  }
  if (done) {
    *sendComm = pc->conn;
    return ncclSuccess;
  }
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.byHandle[key] = std::move(pc);
  return ncclSuccess;
}

ncclResult_t ucxAccept(void* listenComm, void** recvComm) {
  if (listenComm == nullptr || recvComm == nullptr) return fail(ncclInvalidArgument, "NET/UCX: accept: NULL argument");
  *recvComm = nullptr;
  auto* l = static_cast<UcxListen*>(listenComm);
  bool done = false;
  ncclResult_t res = ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(l->w->mu);
    l->w->progress();
    if (l->accepting == nullptr && !l->requests.empty()) res = beginAccept(l);
    if (res == ncclSuccess && l->accepting != nullptr) res = advanceAccept(l, &done);
  }
  if (res != ncclSuccess || done) {
    std::unique_ptr<AcceptState> state = std::move(l->accepting);
    if (state == nullptr) return res;
    if (res != ncclSuccess) {
      {
        std::lock_guard<std::mutex> lock(l->w->mu);
        dropOp(l->w, &state->helloRecv);
        dropOp(l->w, &state->welcomeSend);
      }
      UcxWorker* w = nullptr;
      CHORUS_CHECK(UcxWorkerRegistry::acquire(&w));  // destroyConn releases one use
      destroyConn(state->conn);
      return res;
    }
    CHORUS_CHECK(UcxWorkerRegistry::acquire(&state->conn->w));  // the recv comm holds its own use
    *recvComm = state->conn;
  }
  return ncclSuccess;
}

ncclResult_t ucxCloseSend(void* sendComm) {
  if (sendComm != nullptr) destroyConn(static_cast<UcxConn*>(sendComm));
  return ncclSuccess;
}

ncclResult_t ucxCloseRecv(void* recvComm) {
  if (recvComm != nullptr) destroyConn(static_cast<UcxConn*>(recvComm));
  return ncclSuccess;
}

ncclResult_t ucxCloseListen(void* listenComm) {
  auto* l = static_cast<UcxListen*>(listenComm);
  if (l == nullptr) return ncclSuccess;
  UcxWorker* w = l->w;
  {
    std::lock_guard<std::mutex> lock(w->mu);
    for (ucp_conn_request_h request : l->requests) w->api->listenerReject(l->listener, request);
    w->api->listenerDestroy(l->listener);
  }
  if (l->accepting != nullptr) {
    {
      std::lock_guard<std::mutex> lock(w->mu);
      dropOp(w, &l->accepting->helloRecv);
      dropOp(w, &l->accepting->welcomeSend);
    }
    CHORUS_CHECK(UcxWorkerRegistry::acquire(&w));
    destroyConn(l->accepting->conn);
  }
  delete l;
  UcxWorkerRegistry::release(w);
  return ncclSuccess;
}

}  // namespace chorus::ucx
