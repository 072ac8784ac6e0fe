// Grid size of the standalone reduction kernel.
#include <algorithm>

#include "kernels/colls/reduce_kernel.cuh"

namespace chorus::dev {

// Enough blocks to give every SM a few resident blocks, but no more than there
// are packs to hand out: a wave larger than that only adds idle blocks.
int reduceGridBlocks(const ReduceLaunch& args, size_t elemBytes) {
  int device = 0, sms = 1;
  if (cudaGetDevice(&device) == cudaSuccess) cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const size_t packs = (args.count * elemBytes + 15) / 16;
  const size_t perBlock = size_t(kReduceThreads) * (elemBytes == 1 ? 2 : kUnroll);
  size_t blocks = std::min<size_t>((packs + perBlock - 1) / perBlock, size_t(sms) * 4);
  if (args.maxBlocks > 0) blocks = std::min<size_t>(blocks, size_t(args.maxBlocks));
  return static_cast<int>(std::max<size_t>(blocks, 1));
}

}  // namespace chorus::dev
