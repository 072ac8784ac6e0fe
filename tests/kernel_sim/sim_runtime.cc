// The scheduler behind cuda_sim.h: a CPU thread per block, fibers for the
// block's threads.
#include <sched.h>
#include <ucontext.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

#include "kernel_sim/cuda_sim.h"

namespace chorus::sim {

thread_local Dim3 blockIndex;
thread_local Dim3 blockSize;

namespace {

// Each fiber's stack: the kernels take their 32 KB parameter block by value.
constexpr size_t kStackBytes = size_t{256} * 1024;

struct Fiber {
  ucontext_t context{};
  std::unique_ptr<char[]> stack;
  Dim3 index;
  bool done = false;
};

struct Block {
  ucontext_t scheduler{};
  std::vector<Fiber> fibers;
  size_t current = 0;
  int live = 0;
  // The barrier: how many live threads wait at it, where, and its round.
  int arrived = 0;
  const char* file = nullptr;
  int line = 0;
  uint64_t round = 0;
  bool spun = false;  // a thread yielded from a spin loop during this pass
  const std::function<void()>* body = nullptr;
  std::vector<std::string> faults;

  void fault(const std::string& what) {
    if (faults.size() < 8) faults.push_back("block " + std::to_string(blockIndex.x) + ": " + what);
  }
};

thread_local Block* tlBlock = nullptr;

void yieldToScheduler() {
  Block& b = *tlBlock;
  swapcontext(&b.fibers[b.current].context, &b.scheduler);
}

void fiberEntry() {
  Block& b = *tlBlock;
  (*b.body)();
  b.fibers[b.current].done = true;
  --b.live;
  // Returning resumes uc_link: the scheduler.
}

std::string where(const char* file, int line) { return std::string(file) + ":" + std::to_string(line); }

// A barrier that only exited threads are missing: CUDA leaves it undefined;
// here it is a fault, and the waiting threads are let through.
void releaseStrandedBarrier(Block& b) {
  if (b.arrived == 0 || b.arrived != b.live) return;
  b.fault("threads exited while " + std::to_string(b.arrived) + " others wait at __syncthreads() at " +
          where(b.file, b.line));
  b.arrived = 0;
  ++b.round;
}

void runBlock(int index, int threads, const std::function<void()>& body, std::vector<std::string>* faults) {
  blockIndex = Dim3{static_cast<unsigned>(index), 0, 0};
  blockSize = Dim3{static_cast<unsigned>(threads), 1, 1};
  Block b;
  b.body = &body;
  b.fibers.resize(static_cast<size_t>(threads));
  tlBlock = &b;
  for (int t = 0; t < threads; ++t) {
    Fiber& f = b.fibers[static_cast<size_t>(t)];
    f.index = Dim3{static_cast<unsigned>(t), 0, 0};
    f.stack = std::make_unique<char[]>(kStackBytes);
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack.get();
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = &b.scheduler;
    makecontext(&f.context, fiberEntry, 0);
  }
  b.live = threads;
  while (b.live > 0) {
    b.spun = false;
    for (size_t i = 0; i < b.fibers.size(); ++i) {
      if (b.fibers[i].done) continue;
      b.current = i;
      swapcontext(&b.scheduler, &b.fibers[i].context);
      releaseStrandedBarrier(b);
    }
    if (b.spun) sched_yield();
  }
  tlBlock = nullptr;
  *faults = std::move(b.faults);
}

}  // namespace

const Dim3& threadIndex() { return tlBlock->fibers[tlBlock->current].index; }

void syncThreads(const char* file, int line) {
  Block& b = *tlBlock;
  if (b.arrived == 0) {
    b.file = file;
    b.line = line;
  } else if (b.line != line || std::string(b.file) != file) {
    b.fault("thread " + std::to_string(b.current) + " at __syncthreads() at " + where(file, line) +
            " while others wait at " + where(b.file, b.line));
  }
  if (++b.arrived == b.live) {
    b.arrived = 0;
    ++b.round;
    return;
  }
  const uint64_t round = b.round;
  while (b.round == round) yieldToScheduler();
}

uint64_t clockNs() {
  if (tlBlock != nullptr) {
    tlBlock->spun = true;
    yieldToScheduler();
  }
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

std::vector<std::string> launch(int blocks, int threads, const std::function<void()>& body) {
  std::vector<std::vector<std::string>> perBlock(static_cast<size_t>(blocks));
  std::vector<std::thread> cpuThreads;
  cpuThreads.reserve(static_cast<size_t>(blocks));
  for (int b = 0; b < blocks; ++b)
    cpuThreads.emplace_back(runBlock, b, threads, std::cref(body), &perBlock[static_cast<size_t>(b)]);
  for (std::thread& t : cpuThreads) t.join();
  std::vector<std::string> faults;
  for (auto& f : perBlock) faults.insert(faults.end(), f.begin(), f.end());
  return faults;
}

}  // namespace chorus::sim
