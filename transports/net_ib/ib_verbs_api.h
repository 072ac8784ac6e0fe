// The libibverbs functions the verbs backend calls, resolved from
// libibverbs.so.1 with dlopen at run time, so libnccl.so.2 loads on machines
// without rdma-core. Posting and polling (ibv_post_send, ibv_post_recv,
// ibv_poll_cq) are inline in verbs.h and go through the device's own ops
// table, so they need no entry here. Built only with CHORUS_HAVE_IBVERBS.
#pragma once

#ifdef CHORUS_HAVE_IBVERBS
#include <infiniband/verbs.h>

namespace chorus::ib {

struct VerbsApi {
  ibv_device** (*getDeviceList)(int*);
  void (*freeDeviceList)(ibv_device**);
  const char* (*getDeviceName)(ibv_device*);
  ibv_context* (*openDevice)(ibv_device*);
  int (*closeDevice)(ibv_context*);
  int (*queryDevice)(ibv_context*, ibv_device_attr*);
  int (*queryPort)(ibv_context*, uint8_t, ibv_port_attr*);
  ibv_pd* (*allocPd)(ibv_context*);
  int (*deallocPd)(ibv_pd*);
  ibv_mr* (*regMr)(ibv_pd*, void*, size_t, int);
  ibv_mr* (*regDmabufMr)(ibv_pd*, uint64_t, size_t, uint64_t, int, int);  // NULL: rdma-core too old
  int (*deregMr)(ibv_mr*);
  ibv_cq* (*createCq)(ibv_context*, int, void*, ibv_comp_channel*, int);
  int (*destroyCq)(ibv_cq*);
  ibv_qp* (*createQp)(ibv_pd*, ibv_qp_init_attr*);
  int (*destroyQp)(ibv_qp*);
  int (*modifyQp)(ibv_qp*, ibv_qp_attr*, int);
};

// Loaded on first use; nullptr (after an INFO line) when libibverbs or a
// required symbol is missing.
const VerbsApi* verbsApi();

}  // namespace chorus::ib
#endif  // CHORUS_HAVE_IBVERBS
