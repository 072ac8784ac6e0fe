// The verbs backend's knobs, turned into values the data path uses: queue
// pair attributes (NCCL_IB_TIMEOUT, NCCL_IB_RETRY_CNT, MTU negotiation,
// addressing from the exchanged connection records) and the GPUDirect policy
// (NCCL_NET_GDR_LEVEL, peer-memory detection). Pure functions over plain
// structs; ib_qp.cc copies them into ibv_qp_attr.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "nccl.h"
#include "topo/topology.h"
#include "transports/net_ib/ib_conn_meta.h"

namespace chorus::ib {

struct IbQpKnobs {
  int timeout = 20;  // 4.096 us * 2^timeout per retry
  int retryCnt = 7;
  int rnrRetry = 7;  // 7: retry forever (receives are always pre-posted)
};
// Reads and validates NCCL_IB_TIMEOUT (1..31) and NCCL_IB_RETRY_CNT (0..7).
ncclResult_t qpKnobsFromValues(int64_t timeout, int64_t retryCnt, IbQpKnobs* out);

// Ready-to-receive: where the remote QP is and how to reach it.
struct IbRtrAttrs {
  uint8_t pathMtu = 0;  // min of both sides
  uint32_t destQpn = 0;
  uint32_t rqPsn = 0;
  uint8_t maxDestRdAtomic = 1;
  uint8_t minRnrTimer = 12;
  bool global = false;  // GRH: RoCE always, IB only across subnets (not supported here)
  std::array<uint8_t, 16> dgid{};
  uint8_t sgidIndex = 0;
  uint8_t hopLimit = 255;
  uint16_t dlid = 0;
  uint8_t port = 1;
  uint8_t serviceLevel = 0;  // NCCL_IB_SL
  uint8_t trafficClass = 0;  // NCCL_IB_TC (GRH, so RoCE)
};
// Ready-to-send: our side's retry behaviour and send PSN.
struct IbRtsAttrs {
  uint8_t timeout = 0;
  uint8_t retryCnt = 0;
  uint8_t rnrRetry = 0;
  uint32_t sqPsn = 0;
  uint8_t maxRdAtomic = 1;
};

// Fails (ncclRemoteError) when the link layers differ.
// Validates NCCL_IB_SL (0..15) and NCCL_IB_TC (0..255) into `rtr`.
ncclResult_t applyQosKnobs(int64_t serviceLevel, int64_t trafficClass, IbRtrAttrs* rtr);
ncclResult_t computeRtrAttrs(const IbConnMeta& local, const IbConnMeta& remote, IbRtrAttrs* out);
IbRtsAttrs computeRtsAttrs(const IbConnMeta& local, const IbQpKnobs& knobs);

// NCCL_NET_GDR_LEVEL: the farthest GPU-NIC path class (topo::PathType) over
// which GPU memory is registered directly. Names LOC < PIX < PXB < PHB < SYS
// (or one digit in NCCL's legacy numbering, topo/path_level.h). LOC (0)
// disables GPUDirect RDMA.
// Empty: the default (PXB). false on garbage.
bool parseGdrLevel(const std::string& text, topo::PathType* level);
bool gdrAllowed(topo::PathType level, topo::PathType gpuToNic);

// Kernel support for registering GPU memory with ibv_reg_mr (nvidia-peermem
// or the older nv_peer_mem), looked up under `sysRoot` ("/sys" normally).
bool peerMemoryLoaded(const std::string& sysRoot);

// What a probe registration of an invalid dma-buf (ibv_reg_dmabuf_mr with fd
// -1) says about the kernel's support: only EOPNOTSUPP and EPROTONOSUPPORT
// mean none (an old kernel or a driver without it); any other refusal (EBADF)
// means it looked at the fd, so real ones work.
bool dmabufProbeMeansSupported(bool registered, int err);

}  // namespace chorus::ib
