#include "transport/fifo.h"

#include <new>

namespace chorus {

void fifoInit(void* mem, uint32_t slotBytes, uint32_t nslots, int receiverPid) {
  auto* ctl = new (mem) FifoControl();
  ctl->tail.store(0, std::memory_order_relaxed);
  ctl->head.store(0, std::memory_order_relaxed);
  ctl->taken.store(0, std::memory_order_relaxed);
  ctl->slotBytes = slotBytes;
  ctl->nslots = nslots;
  ctl->receiverPid = receiverPid;
  ctl->senderPid = 0;
  for (auto& s : ctl->sizes) s = 0;
  std::atomic_thread_fence(std::memory_order_release);
  ctl->magic = kFifoMagic;
}

}  // namespace chorus
