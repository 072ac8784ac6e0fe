#include "transports/net_ib/ib_qp.h"

#ifdef CHORUS_HAVE_IBVERBS
#include <cstring>
#include <random>

#include "core/params.h"
#include "core/result.h"

namespace chorus::ib {
namespace {

constexpr int kInlineBytes = 64;  // FIFO descriptors go inline

uint32_t randomPsn() {
  std::random_device rd;
  return rd() & 0xffffff;
}

ncclResult_t modify(const VerbsApi* api, ibv_qp* qp, ibv_qp_attr* attr, int mask, const char* what) {
  int err = api->modifyQp(qp, attr, mask);
  if (err != 0) return fail(ncclSystemError, "NET/IB: moving QP %u to %s failed: %s", qp->qp_num, what, strerror(err));
  return ncclSuccess;
}

}  // namespace

ncclResult_t createQp(const IbDevice& dev, ibv_cq* cq, int sendWr, int recvWr, IbQp* out) {
  const VerbsApi* api = verbsApi();
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = static_cast<uint32_t>(sendWr);
  init.cap.max_recv_wr = static_cast<uint32_t>(recvWr);
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = kInlineBytes;
  ibv_qp* qp = api->createQp(dev.pd, &init);
  if (qp == nullptr)
    return fail(ncclSystemError, "NET/IB: ibv_create_qp on %s failed: %s", dev.name.c_str(), strerror(errno));
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = static_cast<uint8_t>(dev.port);
  attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  ncclResult_t res =
      modify(api, qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
  if (res != ncclSuccess) {
    api->destroyQp(qp);
    return res;
  }
  out->qp = qp;
  out->local = IbConnMeta{};
  out->local.qpn = qp->qp_num;
  out->local.psn = randomPsn();
  out->local.lid = dev.addr.lid;
  out->local.mtu = static_cast<uint8_t>(dev.mtu);
  out->local.port = static_cast<uint8_t>(dev.port);
  out->local.linkLayer = dev.addr.linkLayer;
  out->local.gidIndex = static_cast<uint8_t>(dev.addr.gidIndex);
  out->local.gid = dev.addr.gid;
  return ncclSuccess;
}

ncclResult_t connectQp(const IbQp& qp, const IbConnMeta& remote, const IbQpKnobs& knobs) {
  const VerbsApi* api = verbsApi();
  IbRtrAttrs rtr;
  CHORUS_CHECK(computeRtrAttrs(qp.local, remote, &rtr));
  CHORUS_CHECK(applyQosKnobs(params::ibSl(), params::ibTc(), &rtr));
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = static_cast<ibv_mtu>(rtr.pathMtu);
  attr.dest_qp_num = rtr.destQpn;
  attr.rq_psn = rtr.rqPsn;
  attr.max_dest_rd_atomic = rtr.maxDestRdAtomic;
  attr.min_rnr_timer = rtr.minRnrTimer;
  attr.ah_attr.port_num = rtr.port;
  attr.ah_attr.dlid = rtr.dlid;
  attr.ah_attr.is_global = rtr.global ? 1 : 0;
  attr.ah_attr.sl = rtr.serviceLevel;
  if (rtr.global) {
    std::memcpy(attr.ah_attr.grh.dgid.raw, rtr.dgid.data(), 16);
    attr.ah_attr.grh.sgid_index = rtr.sgidIndex;
    attr.ah_attr.grh.hop_limit = rtr.hopLimit;
    attr.ah_attr.grh.traffic_class = rtr.trafficClass;
  }
  CHORUS_CHECK(modify(api, qp.qp, &attr,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                      "RTR"));
  IbRtsAttrs rts = computeRtsAttrs(qp.local, knobs);
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = rts.timeout;
  attr.retry_cnt = rts.retryCnt;
  attr.rnr_retry = rts.rnrRetry;
  attr.sq_psn = rts.sqPsn;
  attr.max_rd_atomic = rts.maxRdAtomic;
  return modify(
      api, qp.qp, &attr,
      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
      "RTS");
}

void destroyQp(IbQp* qp) {
  if (qp->qp != nullptr) verbsApi()->destroyQp(qp->qp);
  qp->qp = nullptr;
}

}  // namespace chorus::ib
#endif  // CHORUS_HAVE_IBVERBS
