// C callers may pass any int where the API takes an enum. Such calls must be
// rejected with ncclInvalidArgument — without undefined behaviour, which the
// sanitizer build would report — and leave the communicator usable.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chorus/chorus.h"
#include "nccl.h"

namespace {

// The C view of ncclAllReduce: the same ABI with plain ints for the enums.
using AllReduceAsC = ncclResult_t (*)(const void*, void*, size_t, int, int, ncclComm_t, cudaStream_t);

TEST(RawEnumArgs, OutOfRangeDatatypeAndOpAreRejected) {
  chorusSetDefaultMode(chorusModeHost);
  ncclComm_t comm = nullptr;
  int dev = 0;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, &dev), ncclSuccess);
  auto allReduce = reinterpret_cast<AllReduceAsC>(&ncclAllReduce);
  float x = 3, y = 0;
  EXPECT_EQ(allReduce(&x, &y, 1, -1, ncclSum, comm, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("invalid datatype -1"), std::string::npos) << ncclGetLastError(comm);
  EXPECT_EQ(allReduce(&x, &y, 1, 1 << 20, ncclSum, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(allReduce(&x, &y, 1, ncclFloat, -7, comm, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("operator -7"), std::string::npos) << ncclGetLastError(comm);
  EXPECT_EQ(allReduce(&x, &y, 1, ncclFloat, 1 << 24, comm, nullptr), ncclInvalidArgument);
  // Still usable.
  ASSERT_EQ(ncclAllReduce(&x, &y, 1, ncclFloat, ncclSum, comm, nullptr), ncclSuccess);
  EXPECT_EQ(y, 3.0f);
  ncclCommDestroy(comm);
}

}  // namespace
