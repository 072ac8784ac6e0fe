// Library-managed error-feedback residuals (src/core/wire_residuals.h): one
// zeroed array per (buffer, count), the same one on every later call, and in
// GPU mode the address the mapping gives (a mapping that fails is an error
// and leaves nothing behind, so the next call tries again).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <utility>

#include "core/wire_residuals.h"

namespace chorus {
namespace {

int mapCalls = 0;
bool mapFails = false;
float fakeDeviceArray[16];

std::weak_ptr<void> lastOwner;  // what the last successful map was given to keep alive

ncclResult_t fakeMap(int device, void* base, size_t bytes, std::shared_ptr<void> owner, std::shared_ptr<void>* keep,
                     void** address) {
  ++mapCalls;
  if (mapFails) return ncclSystemError;
  EXPECT_EQ(device, 3);
  EXPECT_EQ(bytes % 4096, 0u) << "whole pages";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(base) % 4096, 0u) << "page-aligned";
  EXPECT_EQ(owner.get(), base);
  EXPECT_GE(bytes, 8 * sizeof(float));
  lastOwner = owner;
  *keep = std::move(owner);  // as the real mapping does: the array lives as long as the mapping
  *address = fakeDeviceArray;
  return ncclSuccess;
}

TEST(WireResiduals, OneZeroedArrayPerBufferAndCount) {
  WireResiduals residuals;
  const int buffer = 0;
  float* a = nullptr;
  ASSERT_EQ(residuals.residualFor(&buffer, 8, nullptr, -1, &a), ncclSuccess);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(a[i], 0.0f);
  a[3] = 1.5f;
  float* again = nullptr;
  ASSERT_EQ(residuals.residualFor(&buffer, 8, nullptr, -1, &again), ncclSuccess);
  EXPECT_EQ(again, a);
  EXPECT_EQ(again[3], 1.5f) << "a later call keeps what the earlier one left";
  float* other = nullptr;
  ASSERT_EQ(residuals.residualFor(&buffer, 4, nullptr, -1, &other), ncclSuccess);
  EXPECT_NE(other, a);
  EXPECT_EQ(residuals.bytes(), 12 * sizeof(float));
}

TEST(WireResiduals, GpuModeGetsTheMappedAddressAndAFailedMapLeavesNothing) {
  WireResiduals residuals;
  const int buffer = 0;
  float* r = nullptr;
  mapCalls = 0;
  mapFails = true;
  EXPECT_EQ(residuals.residualFor(&buffer, 8, &fakeMap, 3, &r), ncclSystemError);
  EXPECT_EQ(residuals.bytes(), 0u);
  mapFails = false;
  ASSERT_EQ(residuals.residualFor(&buffer, 8, &fakeMap, 3, &r), ncclSuccess);
  EXPECT_EQ(r, fakeDeviceArray);
  ASSERT_EQ(residuals.residualFor(&buffer, 8, &fakeMap, 3, &r), ncclSuccess);
  EXPECT_EQ(r, fakeDeviceArray);
  EXPECT_EQ(mapCalls, 2) << "mapped once, when created";
}

// The mapping holds the array: it is freed only after the mapping is gone
// (in GPU mode the unmapping, and then the free, wait for an idle device).
TEST(WireResiduals, TheMappingKeepsTheArrayAliveUntilItGoes) {
  const int buffer = 0;
  float* r = nullptr;
  mapFails = false;
  {
    WireResiduals residuals;
    ASSERT_EQ(residuals.residualFor(&buffer, 8, &fakeMap, 3, &r), ncclSuccess);
    EXPECT_FALSE(lastOwner.expired());
  }
  EXPECT_TRUE(lastOwner.expired()) << "freed with the residuals once the mapping went";
}

}  // namespace
}  // namespace chorus
