#include "plan/dry_connectors.h"

namespace chorus {

FifoEnd DryConnectors::emptyEnd(const ConnKey& key, uint32_t slotBytes, uint32_t nslots) {
  FifoEnd end;
  end.slotBytes = slotBytes;
  end.nslots = nslots;
  end.peer = key.peer;
  return end;
}

ncclResult_t DryConnectors::requestRecv(const ConnKey& key, uint32_t slotBytes, uint32_t nslots, RecvConnector** out) {
  auto it = recvs_.find(key);
  if (it == recvs_.end()) {
    recvStore_.push_back(std::make_unique<RecvConnector>(emptyEnd(key, slotBytes, nslots)));
    it = recvs_.emplace(key, recvStore_.back().get()).first;
    info_[it->second] = Info{key, false, slotBytes, nslots};
  }
  *out = it->second;
  return ncclSuccess;
}

ncclResult_t DryConnectors::requestSend(const ConnKey& key, uint32_t slotBytes, uint32_t nslots, SendConnector** out) {
  auto it = sends_.find(key);
  if (it == sends_.end()) {
    sendStore_.push_back(std::make_unique<SendConnector>(emptyEnd(key, slotBytes, nslots)));
    it = sends_.emplace(key, sendStore_.back().get()).first;
    info_[it->second] = Info{key, true, slotBytes, nslots};
  }
  *out = it->second;
  return ncclSuccess;
}

const DryConnectors::Info* DryConnectors::info(const void* connector) const {
  auto it = info_.find(connector);
  return it == info_.end() ? nullptr : &it->second;
}

}  // namespace chorus
