// The p2p transport on one GPU, both ends in this process: the receiver's
// FIFO is zeroed device memory on its GPU, the sender reaches the very same
// allocation by pointer, bytes copied through the sender's end read back
// through the receiver's end, and the allocation outlives whichever end is
// dropped first. Handle validation and misuse are checked without a GPU.
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/host_identity.h"
#include "core/result.h"
#include "gpu/gpu_test_util.h"
#include "transport/fifo.h"
#include "transports/p2p/p2p_handle.h"
#include "transports/p2p/p2p_transport.h"

namespace chorus {
namespace {

constexpr uint32_t kSlotBytes = 4096;
constexpr uint32_t kSlots = 4;

PeerInfo gpuRank(int rank, int device) {
  PeerInfo p;
  p.rank = rank;
  p.pid = getpid();
  p.hostHash = hostHash();
  p.processToken = processToken();
  p.cudaDev = device;
  p.hostMode = 0;
  return p;
}

ConnRequest request(int self, int peer, int device, uint32_t slotBytes = kSlotBytes) {
  ConnRequest r;
  r.selfRank = self;
  r.peerRank = peer;
  r.slotBytes = slotBytes;
  r.nslots = kSlots;
  r.deviceMemory = true;
  r.selfDevice = device;
  r.label = "comm test p2p ch0 0->1";
  return r;
}

TEST(P2pTransportGpu, OneProcessSharesTheDeviceFifo) {
  CHORUS_REQUIRE_GPU();
  P2pTransport t;
  ASSERT_TRUE(t.canConnect(gpuRank(0, 0), gpuRank(1, 0)));
  FifoEnd recvEnd, sendEnd;
  std::vector<uint8_t> handle;
  ASSERT_EQ(t.createRecv(request(1, 0, 0), gpuRank(0, 0), &recvEnd, &handle), ncclSuccess) << lastErrorMessage();
  ASSERT_EQ(handle.size(), sizeof(p2p::P2pHandle));
  EXPECT_EQ(recvEnd.slotBytes, kSlotBytes);
  EXPECT_EQ(recvEnd.nslots, kSlots);
  EXPECT_EQ(recvEnd.peerPid, 0);
  EXPECT_EQ(recvEnd.slots, reinterpret_cast<char*>(recvEnd.ctl) + fifoControlBytes());

  cudaPointerAttributes attr{};
  CUDA_OK(cudaPointerGetAttributes(&attr, recvEnd.ctl));
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
  EXPECT_EQ(attr.device, 0);

  // Zeroed: counters, sizes and every slot.
  const size_t total = fifoTotalBytes(kSlotBytes, kSlots);
  std::vector<unsigned char> image(total, 0xff);
  CUDA_OK(cudaMemcpy(image.data(), recvEnd.ctl, total, cudaMemcpyDeviceToHost));
  size_t nonzero = 0;
  for (unsigned char c : image) nonzero += c != 0;
  EXPECT_EQ(nonzero, 0u);

  ASSERT_EQ(t.connectSend(request(0, 1, 0), gpuRank(1, 0), handle, &sendEnd), ncclSuccess) << lastErrorMessage();
  EXPECT_EQ(sendEnd.ctl, recvEnd.ctl);
  EXPECT_EQ(sendEnd.slots, recvEnd.slots);

  // A slot and the tail written through the sender's end...
  std::vector<uint32_t> pattern(kSlotBytes / 4);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = 0xc0de0000u + static_cast<uint32_t>(i);
  CUDA_OK(cudaMemcpy(sendEnd.slot(5), pattern.data(), kSlotBytes, cudaMemcpyHostToDevice));
  const uint64_t tail = 6;
  CUDA_OK(cudaMemcpy(&sendEnd.ctl->tail, &tail, sizeof(tail), cudaMemcpyHostToDevice));
  // ...read back through the receiver's end.
  std::vector<uint32_t> back(pattern.size(), 0);
  CUDA_OK(cudaMemcpy(back.data(), recvEnd.slot(5), kSlotBytes, cudaMemcpyDeviceToHost));
  EXPECT_EQ(back, pattern);
  uint64_t seen = 0;
  CUDA_OK(cudaMemcpy(&seen, &recvEnd.ctl->tail, sizeof(seen), cudaMemcpyDeviceToHost));
  EXPECT_EQ(seen, tail);

  // The sender holds its own reference: dropping the receiver first keeps the memory.
  recvEnd = FifoEnd{};
  std::vector<uint32_t> again(pattern.size(), 0);
  CUDA_OK(cudaMemcpy(again.data(), sendEnd.slot(1), kSlotBytes, cudaMemcpyDeviceToHost));
  EXPECT_EQ(again, pattern);

  // A handle is good for one sender only.
  FifoEnd second;
  EXPECT_EQ(t.connectSend(request(0, 1, 0), gpuRank(1, 0), handle, &second), ncclInternalError);
  EXPECT_NE(std::string(lastErrorMessage()).find("gone"), std::string::npos) << lastErrorMessage();
}

TEST(P2pTransportGpu, ReceiverGoneBeforeSender) {
  CHORUS_REQUIRE_GPU();
  P2pTransport t;
  std::vector<uint8_t> handle;
  {
    FifoEnd recvEnd;
    ASSERT_EQ(t.createRecv(request(1, 0, 0), gpuRank(0, 0), &recvEnd, &handle), ncclSuccess) << lastErrorMessage();
  }
  FifoEnd sendEnd;
  EXPECT_EQ(t.connectSend(request(0, 1, 0), gpuRank(1, 0), handle, &sendEnd), ncclInternalError);
  EXPECT_EQ(sendEnd.ctl, nullptr);
}

// The rest needs no GPU: the handle is checked before any CUDA call.
TEST(P2pTransportGpu, BadHandlesAreRejected) {
  P2pTransport t;
  FifoEnd end;
  std::vector<uint8_t> junk = {1, 2, 3};
  EXPECT_EQ(t.connectSend(request(0, 1, 0), gpuRank(1, 0), junk, &end), ncclInternalError);
  EXPECT_NE(std::string(lastErrorMessage()).find("comm test p2p"), std::string::npos) << lastErrorMessage();

  p2p::P2pHandle h;
  h.device = 0;
  h.pointer = 0x1000;
  h.slotBytes = kSlotBytes;
  h.nslots = kSlots;
  h.totalBytes = fifoTotalBytes(kSlotBytes, kSlots);
  std::vector<uint8_t> bytes;
  p2p::encodeP2pHandle(h, &bytes);
  EXPECT_EQ(t.connectSend(request(0, 1, 0, 2 * kSlotBytes), gpuRank(1, 0), bytes, &end), ncclInvalidUsage);
  EXPECT_NE(std::string(lastErrorMessage()).find("CHORUS_SLOTS"), std::string::npos) << lastErrorMessage();
  bytes.push_back(0);
  EXPECT_EQ(t.connectSend(request(0, 1, 0), gpuRank(1, 0), bytes, &end), ncclInternalError);
  EXPECT_EQ(end.ctl, nullptr);
}

TEST(P2pTransportGpu, HostModeRequestsAreRefused) {
  P2pTransport t;
  PeerInfo host = gpuRank(1, 0);
  host.hostMode = 1;
  EXPECT_FALSE(t.canConnect(gpuRank(0, 0), host));
  ConnRequest req = request(1, 0, 0);
  req.deviceMemory = false;
  FifoEnd end;
  std::vector<uint8_t> handle;
  EXPECT_EQ(t.createRecv(req, gpuRank(0, 0), &end, &handle), ncclInternalError);
  EXPECT_TRUE(handle.empty());
}

}  // namespace
}  // namespace chorus
