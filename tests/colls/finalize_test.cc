// ncclCommFinalize synchronizes ranks, so it must work when one thread
// finalizes every rank inside a group, and on non-blocking communicators.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "chorus/chorus.h"
#include "nccl.h"

namespace {

TEST(Finalize, OneThreadFinalizesAllRanksInAGroup) {
  chorusSetDefaultMode(chorusModeHost);
  const int n = 4;
  std::vector<ncclComm_t> comms(n);
  ASSERT_EQ(ncclCommInitAll(comms.data(), n, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (ncclComm_t c : comms) ASSERT_EQ(ncclCommFinalize(c), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  // A finalized communicator refuses new work with a clear error.
  float x = 1;
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comms[0], nullptr), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(comms[0])).find("finalized"), std::string::npos);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST(Finalize, NonBlockingCommunicatorsFinalizeInTheBackground) {
  chorusSetDefaultMode(chorusModeHost);
  const int n = 3;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<std::thread> threads;
  std::vector<ncclResult_t> finals(n, ncclInternalError);
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
      cfg.blocking = 0;
      ncclComm_t comm = nullptr;
      ncclResult_t res = ncclCommInitRankConfig(&comm, n, id, r, &cfg);
      ncclResult_t state = res;
      while (state == ncclInProgress) ncclCommGetAsyncError(comm, &state);
      if (state != ncclSuccess) return;
      res = ncclCommFinalize(comm);
      state = res;
      while (state == ncclInProgress) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        ncclCommGetAsyncError(comm, &state);
      }
      finals[r] = state;
      ncclCommDestroy(comm);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(finals[r], ncclSuccess) << "rank " << r;
}

}  // namespace
