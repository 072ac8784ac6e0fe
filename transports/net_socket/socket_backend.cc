// The socket backend's chorusNet_v1_t. Entries are thin: setup lives in
// socket_setup.cc, the data path in socket_comm.cc / socket_helpers.cc.
#include "transports/net_socket/socket_backend.h"

#include "core/host_identity.h"
#include "core/result.h"
#include "transports/net_socket/socket_comm.h"
#include "transports/net_socket/socket_setup.h"

namespace chorus {
namespace {

using sock::Device;
using sock::Request;
using sock::SocketComm;

ncclResult_t socketInit(chorusNetLogFn_t) {
  std::shared_ptr<const std::vector<Device>> devs;
  return sock::currentDevices(&devs);
}

ncclResult_t socketDevices(int* ndev) {
  std::shared_ptr<const std::vector<Device>> devs;
  CHORUS_CHECK(sock::currentDevices(&devs));
  *ndev = static_cast<int>(devs->size());
  return ncclSuccess;
}

ncclResult_t socketGetProperties(int dev, chorusNetProperties_v1_t* props) {
  std::shared_ptr<const std::vector<Device>> devs;
  CHORUS_CHECK(sock::currentDevices(&devs));
  if (dev < 0 || dev >= static_cast<int>(devs->size()))
    return fail(ncclInvalidArgument, "socket: no device %d (%zu devices)", dev, devs->size());
  const Device& d = (*devs)[dev];
  *props = chorusNetProperties_v1_t{};
  props->name = d.name.c_str();
  props->pciPath = d.pciPath.empty() ? nullptr : d.pciPath.c_str();
  props->guid = hashBytes(d.name.data(), d.name.size());
  props->ptrSupport = CHORUS_NET_PTR_HOST;
  props->speedMbps = d.speedMbps;
  props->port = 0;
  props->latencyUs = 0;
  props->maxComms = 65536;
  props->maxMessageBytes = static_cast<size_t>(1) << 40;
  return ncclSuccess;
}

int dummyRegistration;  // regMr hands out its address: sockets need no registration

ncclResult_t socketRegMr(void*, void*, size_t, int type, void** mhandle) {
  if (type != CHORUS_NET_PTR_HOST)
    return fail(ncclInvalidArgument, "socket: only host memory can be registered (type %d)", type);
  *mhandle = &dummyRegistration;
  return ncclSuccess;
}

ncclResult_t socketDeregMr(void*, void*) { return ncclSuccess; }

ncclResult_t socketIsend(void* comm, void* data, size_t size, int tag, void*, void** request) {
  return static_cast<SocketComm*>(comm)->post(data, size, tag, request);
}

ncclResult_t socketIrecv(void* comm, void* data, size_t size, int tag, void*, void** request) {
  return static_cast<SocketComm*>(comm)->post(data, size, tag, request);
}

ncclResult_t socketIflush(void*, void*, size_t, void*, void** request) {
  *request = nullptr;  // host memory: nothing to flush
  return ncclSuccess;
}

ncclResult_t socketTest(void* request, int* done, size_t* size) {
  auto* req = static_cast<Request*>(request);
  return req->comm->test(req, done, size);
}

ncclResult_t socketCloseSend(void* comm) {
  auto* c = static_cast<SocketComm*>(comm);
  if (c == nullptr) return ncclSuccess;
  c->sayGoodbye();
  delete c;
  return ncclSuccess;
}

ncclResult_t socketCloseRecv(void* comm) {
  delete static_cast<SocketComm*>(comm);
  return ncclSuccess;
}

ncclResult_t socketCloseListen(void* listenComm) {
  if (listenComm != nullptr) sock::closeListener(listenComm);
  return ncclSuccess;
}

const chorusNet_v1_t kSocketBackend = {
    .name = "Socket",
    .version = CHORUS_NET_API_VERSION,
    .init = socketInit,
    .devices = socketDevices,
    .getProperties = socketGetProperties,
    .listen = sock::listenOn,
    .connect = sock::connectTo,
    .accept = sock::acceptFrom,
    .regMr = socketRegMr,
    .regMrDmaBuf = nullptr,
    .deregMr = socketDeregMr,
    .isend = socketIsend,
    .irecv = socketIrecv,
    .iflush = socketIflush,
    .test = socketTest,
    .closeSend = socketCloseSend,
    .closeRecv = socketCloseRecv,
    .closeListen = socketCloseListen,
};

}  // namespace

const chorusNet_v1_t* netSocketBackend() { return &kSocketBackend; }

ncclResult_t netSocketIsendGather(void* comm, const void* head, size_t headBytes, const void* data, size_t size,
                                  int tag, void** request) {
  return static_cast<SocketComm*>(comm)->postGather(head, headBytes, data, size, tag, request);
}

ncclResult_t netSocketIrecvLanding(void* comm, void* data, size_t size, int tag, size_t prefixBytes, NetLandFn land,
                                   void* landArg, void** request) {
  return static_cast<SocketComm*>(comm)->postLanding(data, size, tag, prefixBytes, land, landArg, request);
}

bool netSocketGathers(void* comm) { return static_cast<SocketComm*>(comm)->gathers(); }

bool netSocketPollFd(void* comm, int* fd, short* events) {
  static_cast<SocketComm*>(comm)->pollFd(fd, events);
  return true;
}

}  // namespace chorus
