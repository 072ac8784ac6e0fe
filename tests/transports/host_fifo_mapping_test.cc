// The one helper that maps host FIFO memory for kernels (inproc, shm, net):
// host-mode connections are left untouched; GPU-mode ones are mapped, or,
// where no GPU can be used, fail with a message naming the transport and the
// connection, leaving the end as it was.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "core/result.h"
#include "gpu/gpu_runtime.h"
#include "transport/fifo.h"
#include "transport/host_fifo_mapping.h"

namespace chorus::test {
namespace {

constexpr uint32_t kSlotBytes = 4096;
constexpr uint32_t kSlots = 4;

// A receiver's end over a fresh FIFO on the heap, as a transport builds it.
FifoEnd hostFifoEnd() {
  const size_t bytes = fifoTotalBytes(kSlotBytes, kSlots);
  void* raw = std::aligned_alloc(4096, bytes);
  fifoInit(raw, kSlotBytes, kSlots, 0);
  FifoEnd end;
  end.memory = std::shared_ptr<void>(raw, [](void* p) { std::free(p); });
  pointFifoAt(&end, static_cast<char*>(raw));
  end.slotBytes = kSlotBytes;
  end.nslots = kSlots;
  return end;
}

ConnRequest request(bool deviceMemory) {
  ConnRequest req;
  req.slotBytes = kSlotBytes;
  req.nslots = kSlots;
  req.deviceMemory = deviceMemory;
  req.selfDevice = deviceMemory ? 0 : -1;
  req.label = "comm test ring ch0 0->1";
  return req;
}

TEST(HostFifoMapping, HostModeEndsAreLeftAsTheyAre) {
  FifoEnd end = hostFifoEnd();
  FifoControl* ctl = end.ctl;
  char* slots = end.slots;
  void* memory = end.memory.get();
  ASSERT_EQ(mapFifoEndForKernels(request(false), "shm", &end), ncclSuccess);
  EXPECT_EQ(end.ctl, ctl);
  EXPECT_EQ(end.slots, slots);
  EXPECT_EQ(end.memory.get(), memory);
  EXPECT_EQ(end.memory.use_count(), 1);  // no mapping attached

  std::shared_ptr<void> owner = end.memory;
  char* device = reinterpret_cast<char*>(&end);  // must be cleared
  ASSERT_EQ(mapFifoForKernels(request(false), "inproc", ctl, fifoTotalBytes(kSlotBytes, kSlots), &owner, &device),
            ncclSuccess);
  EXPECT_EQ(device, nullptr);
  EXPECT_EQ(owner.get(), memory);
}

TEST(HostFifoMapping, GpuModeEndsAreMappedOrFailNamingTheConnection) {
  FifoEnd end = hostFifoEnd();
  FifoControl* ctl = end.ctl;
  void* memory = end.memory.get();
  const ncclResult_t res = mapFifoEndForKernels(request(true), "net", &end);
  if (gpu::usable(nullptr)) {
    ASSERT_EQ(res, ncclSuccess) << lastErrorMessage();
    EXPECT_EQ(end.memory.get(), memory);  // still points at the host FIFO, now owning the mapping too
    EXPECT_EQ(end.slots, reinterpret_cast<char*>(end.ctl) + fifoControlBytes());
    return;
  }
  EXPECT_NE(res, ncclSuccess);
  const std::string why = lastErrorMessage();
  EXPECT_NE(why.find("net"), std::string::npos) << why;
  EXPECT_NE(why.find("comm test ring ch0 0->1"), std::string::npos) << why;
  EXPECT_EQ(end.ctl, ctl);
  EXPECT_EQ(end.memory.get(), memory);
}

}  // namespace
}  // namespace chorus::test
