// A network plugin for tests: the built-in socket backend under another name,
// counting its isend/irecv calls so a test can tell the plugin carried data.
#include <atomic>

#include "chorus/net_plugin.h"
#include "transports/net_socket/socket_backend.h"

namespace {

std::atomic<long> isendCalls{0};
std::atomic<long> irecvCalls{0};

ncclResult_t countingIsend(void* comm, void* data, size_t size, int tag, void* mh, void** req) {
  isendCalls.fetch_add(1, std::memory_order_relaxed);
  return chorus::netSocketBackend()->isend(comm, data, size, tag, mh, req);
}

ncclResult_t countingIrecv(void* comm, void* data, size_t size, int tag, void* mh, void** req) {
  irecvCalls.fetch_add(1, std::memory_order_relaxed);
  return chorus::netSocketBackend()->irecv(comm, data, size, tag, mh, req);
}

chorusNet_v1_t makeTable() {
  chorusNet_v1_t t = *chorus::netSocketBackend();
  t.name = "CountingSocket";
  t.isend = countingIsend;
  t.irecv = countingIrecv;
  return t;
}

}  // namespace

extern "C" {
__attribute__((visibility("default"))) chorusNet_v1_t chorusNetPlugin_v1 = makeTable();
__attribute__((visibility("default"))) long chorusTestPluginIsends() { return isendCalls.load(); }
__attribute__((visibility("default"))) long chorusTestPluginIrecvs() { return irecvCalls.load(); }
}
