// A connector FIFO in host memory with both ends, for tests that drive the
// executor's step logic or the GPU translation by hand.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "transport/fifo.h"

namespace chorus::test {

struct HostFifo {
  std::vector<char> memory;
  std::unique_ptr<SendConnector> send;
  std::unique_ptr<RecvConnector> recv;
  // peerReads: the receiver may read the sender's buffers (zero-copy sends).
  // health: set where the FIFO stands for a network link (a proxy moves it).
  HostFifo(uint32_t slotBytes, uint32_t nslots, int senderRank, int receiverRank, bool peerReads = false,
           std::shared_ptr<LinkHealth> health = nullptr)
      : memory(fifoTotalBytes(slotBytes, nslots) + 4096) {
    char* base = memory.data() + (4096 - reinterpret_cast<uintptr_t>(memory.data()) % 4096) % 4096;
    fifoInit(base, slotBytes, nslots, 0);
    FifoEnd end;
    end.ctl = reinterpret_cast<FifoControl*>(base);
    end.slots = base + fifoControlBytes();
    end.slotBytes = slotBytes;
    end.nslots = nslots;
    end.peer = receiverRank;
    end.peerReadsOurBuffers = peerReads;
    end.health = std::move(health);
    send = std::make_unique<SendConnector>(end);
    end.peer = senderRank;
    end.peerReadsOurBuffers = false;
    recv = std::make_unique<RecvConnector>(end);
  }
  uint64_t posted() const { return send->end().ctl->tail.load(); }
  uint64_t freed() const { return send->end().ctl->head.load(); }
};

}  // namespace chorus::test
