#include "transports/net/net_user_memory.h"

#include "transports/net_socket/socket_backend.h"

namespace chorus {

NetGatherSendFn netGatherSendFor(const void* backendTable, void* sendComm) {
  if (backendTable == netSocketBackend() && netSocketGathers(sendComm)) return &netSocketIsendGather;
  return nullptr;
}

NetLandingRecvFn netLandingRecvFor(const void* backendTable) {
  if (backendTable == netSocketBackend()) return &netSocketIrecvLanding;
  return nullptr;
}

}  // namespace chorus
