#include "enqueue/comm_init_all.h"

#include <algorithm>
#include <string>

#include "bootstrap/unique_id.h"
#include "core/comm_lifecycle.h"
#include "core/mode.h"
#include "core/result.h"
#include "enqueue/group.h"
#include "gpu/gpu_runtime.h"

namespace chorus {

ncclResult_t commInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  ncclUniqueId id;
  CHORUS_CHECK(createUniqueId(&id));
  std::fill(comms, comms + ndev, nullptr);
  ModeChoice mode;
  CHORUS_CHECK(chooseMode(nullptr, &mode));
  CHORUS_CHECK(groupStart());
  // Inside the group every init is queued; groupEnd runs them together.
  const DeferRendezvous toGroupEnd = enqueueInit;
  ncclResult_t res = ncclSuccess;
  for (int r = 0; r < ndev && res == ncclSuccess; ++r) {
    if (!mode.hostMode) res = gpu::selectDevice(devlist != nullptr ? devlist[r] : r);
    if (res == ncclSuccess) res = commInitRank(&comms[r], ndev, id, r, nullptr, toGroupEnd);
  }
  ncclResult_t endRes = groupEnd();
  if (!mode.hostMode) (void)gpu::selectDevice(mode.device);
  if (res == ncclSuccess) res = endRes;
  if (res != ncclSuccess) {
    std::string msg = lastErrorMessage();
    for (int r = 0; r < ndev; ++r)
      if (comms[r] != nullptr) commDiscard(comms[r]);
    std::fill(comms, comms + ndev, nullptr);
    return fail(res, "ncclCommInitAll: %s", msg.c_str());
  }
  return ncclSuccess;
}

}  // namespace chorus
