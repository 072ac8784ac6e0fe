// Queue-pair plumbing for the verbs backend: create an RC QP and walk it
// through INIT -> RTR -> RTS with the attributes ib_knobs.h computed.
#pragma once

#ifdef CHORUS_HAVE_IBVERBS
#include "nccl.h"
#include "transports/net_ib/ib_conn_meta.h"
#include "transports/net_ib/ib_devices.h"
#include "transports/net_ib/ib_knobs.h"

namespace chorus::ib {

struct IbQp {
  ibv_qp* qp = nullptr;
  IbConnMeta local;  // qpn, psn, addressing of this end (fifo fields left to the caller)
};

// Creates an RC QP on `dev` using `cq` for both directions and moves it to INIT.
ncclResult_t createQp(const IbDevice& dev, ibv_cq* cq, int sendWr, int recvWr, IbQp* out);
// INIT -> RTR -> RTS against `remote`.
ncclResult_t connectQp(const IbQp& qp, const IbConnMeta& remote, const IbQpKnobs& knobs);
void destroyQp(IbQp* qp);

}  // namespace chorus::ib
#endif  // CHORUS_HAVE_IBVERBS
