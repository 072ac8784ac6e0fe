// Library-managed error-feedback residuals (src/core/wire_residuals.h): one
// zeroed array per (buffer, count), the same one on every later call, and in
// GPU mode the address the mapping gives (a mapping that fails is an error
// and leaves nothing behind, so the next call tries again).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "core/wire_residuals.h"

namespace chorus {
namespace {

int mapCalls = 0;
bool mapFails = false;
float fakeDeviceArray[16];

ncclResult_t fakeMap(void* base, size_t bytes, std::shared_ptr<void>* keep, void** address) {
  ++mapCalls;
  if (mapFails) return ncclSystemError;
  EXPECT_EQ(bytes % 4096, 0u) << "whole pages";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(base) % 4096, 0u) << "page-aligned";
  EXPECT_GE(bytes, 8 * sizeof(float));
  *keep = std::shared_ptr<void>(base, [](void*) {});
  *address = fakeDeviceArray;
  return ncclSuccess;
}

TEST(WireResiduals, OneZeroedArrayPerBufferAndCount) {
  WireResiduals residuals;
  const int buffer = 0;
  float* a = nullptr;
  ASSERT_EQ(residuals.residualFor(&buffer, 8, nullptr, &a), ncclSuccess);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(a[i], 0.0f);
  a[3] = 1.5f;
  float* again = nullptr;
  ASSERT_EQ(residuals.residualFor(&buffer, 8, nullptr, &again), ncclSuccess);
  EXPECT_EQ(again, a);
  EXPECT_EQ(again[3], 1.5f) << "a later call keeps what the earlier one left";
  float* other = nullptr;
  ASSERT_EQ(residuals.residualFor(&buffer, 4, nullptr, &other), ncclSuccess);
  EXPECT_NE(other, a);
  EXPECT_EQ(residuals.bytes(), 12 * sizeof(float));
}

TEST(WireResiduals, GpuModeGetsTheMappedAddressAndAFailedMapLeavesNothing) {
  WireResiduals residuals;
  const int buffer = 0;
  float* r = nullptr;
  mapCalls = 0;
  mapFails = true;
  EXPECT_EQ(residuals.residualFor(&buffer, 8, &fakeMap, &r), ncclSystemError);
  EXPECT_EQ(residuals.bytes(), 0u);
  mapFails = false;
  ASSERT_EQ(residuals.residualFor(&buffer, 8, &fakeMap, &r), ncclSuccess);
  EXPECT_EQ(r, fakeDeviceArray);
  ASSERT_EQ(residuals.residualFor(&buffer, 8, &fakeMap, &r), ncclSuccess);
  EXPECT_EQ(r, fakeDeviceArray);
  EXPECT_EQ(mapCalls, 2) << "mapped once, when created";
}

}  // namespace
}  // namespace chorus
