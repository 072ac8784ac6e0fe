#include "transports/net_ib/ib_knobs.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/result.h"
#include "topo/path_level.h"

namespace chorus::ib {

ncclResult_t qpKnobsFromValues(int64_t timeout, int64_t retryCnt, IbQpKnobs* out) {
  if (timeout < 1 || timeout > 31)
    return fail(ncclInvalidArgument, "NET/IB: NCCL_IB_TIMEOUT=%lld outside 1..31", static_cast<long long>(timeout));
  if (retryCnt < 0 || retryCnt > 7)
    return fail(ncclInvalidArgument, "NET/IB: NCCL_IB_RETRY_CNT=%lld outside 0..7", static_cast<long long>(retryCnt));
  out->timeout = static_cast<int>(timeout);
  out->retryCnt = static_cast<int>(retryCnt);
  return ncclSuccess;
}

ncclResult_t applyQosKnobs(int64_t serviceLevel, int64_t trafficClass, IbRtrAttrs* rtr) {
  if (serviceLevel < 0 || serviceLevel > 15)
    return fail(ncclInvalidArgument, "NET/IB: NCCL_IB_SL=%lld outside 0..15", static_cast<long long>(serviceLevel));
  if (trafficClass < 0 || trafficClass > 255)
    return fail(ncclInvalidArgument, "NET/IB: NCCL_IB_TC=%lld outside 0..255", static_cast<long long>(trafficClass));
  rtr->serviceLevel = static_cast<uint8_t>(serviceLevel);
  rtr->trafficClass = static_cast<uint8_t>(trafficClass);
  return ncclSuccess;
}

ncclResult_t computeRtrAttrs(const IbConnMeta& local, const IbConnMeta& remote, IbRtrAttrs* out) {
  if (local.linkLayer != remote.linkLayer)
    return fail(ncclRemoteError, "NET/IB: peer port is %s but ours is %s (cannot connect RoCE and InfiniBand)",
                remote.linkLayer == LinkLayer::Ethernet ? "RoCE" : "InfiniBand",
                local.linkLayer == LinkLayer::Ethernet ? "RoCE" : "InfiniBand");
  IbRtrAttrs a;
  a.pathMtu = std::min(local.mtu, remote.mtu);
  a.destQpn = remote.qpn;
  a.rqPsn = remote.psn;
  a.port = local.port;
  if (local.linkLayer == LinkLayer::Ethernet) {
    a.global = true;
    a.dgid = remote.gid;
    a.sgidIndex = local.gidIndex;
  } else {
    a.dlid = remote.lid;
  }
  *out = a;
  return ncclSuccess;
}

IbRtsAttrs computeRtsAttrs(const IbConnMeta& local, const IbQpKnobs& knobs) {
  IbRtsAttrs a;
  a.timeout = static_cast<uint8_t>(knobs.timeout);
  a.retryCnt = static_cast<uint8_t>(knobs.retryCnt);
  a.rnrRetry = static_cast<uint8_t>(knobs.rnrRetry);
  a.sqPsn = local.psn;
  return a;
}

bool parseGdrLevel(const std::string& text, topo::PathType* level) {
  if (text.empty()) {
    *level = topo::PathType::PXB;
    return true;
  }
  return topo::parsePathLevel(text, topo::kGdrLevelSyntax, level);
}

bool gdrAllowed(topo::PathType level, topo::PathType gpuToNic) {
  return level != topo::PathType::LOC && gpuToNic <= level;
}

bool dmabufProbeMeansSupported(bool registered, int err) {
  return registered || (err != EOPNOTSUPP && err != EPROTONOSUPPORT);
}

bool peerMemoryLoaded(const std::string& sysRoot) {
  struct stat st {};
  for (const char* path : {"/kernel/mm/memory_peers/nv_mem/version", "/module/nvidia_peermem", "/module/nv_peer_mem"})
    if (stat((sysRoot + path).c_str(), &st) == 0) return true;
  return false;
}

}  // namespace chorus::ib
