// Connection setup of the socket backend: the devices (interfaces), listen,
// connect (streams + hellos) and the non-blocking accept that groups a
// sender's streams into one connection.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/socket.h"
#include "nccl.h"
#include "transports/net_socket/socket_comm.h"

namespace chorus::sock {

struct Device {
  std::string name;
  SockAddr addr;
  std::string pciPath;  // empty when the interface has no PCI device (loopback, bridges)
  int speedMbps = 0;
  std::string pciVendor;  // "0x1d0f" style; empty without a PCI device
};

// The interfaces NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY allow now;
// re-enumerated when either variable changes. The list stays valid for the
// process's lifetime (property strings point into it).
ncclResult_t currentDevices(std::shared_ptr<const std::vector<Device>>* out);

// Helper threads and data streams per connection. Knobs left unset (-2)
// follow NCCL's rule for the sender's interface: none on ordinary NICs (the
// rank's own thread and the proxy move everything on the control stream),
// several streams on the cloud NICs whose single TCP stream is capped well
// below the link (AWS 0x1d0f: 2 x 8, Google gVNIC 0x1ae0: 4 x 1). Set
// values are clamped: threads to [0, 64], sockets to at least 1, and
// threads x sockets to at most 64.
struct StreamShape {
  uint32_t nthreads = 0;
  uint32_t nsocks = 1;
};
StreamShape streamShapeFor(const std::string& pciVendor, int64_t threadsKnob, int64_t socksKnob);

ncclResult_t listenOn(int dev, void* handle, void** listenComm);
ncclResult_t connectTo(int dev, const void* handle, void** sendComm);
ncclResult_t acceptFrom(void* listenComm, void** recvComm);
void closeListener(void* listenComm);

}  // namespace chorus::sock
