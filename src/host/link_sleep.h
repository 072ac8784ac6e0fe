// Waiting on network links by sleeping in poll() (host executor).
//
// When a machine's ranks outnumber its CPUs, an executor that waits with
// sched_yield stays runnable: it keeps taking turns on a core that the rank
// it waits for (and that rank's kernel TCP work) needs. When every lane it
// waits in waits on network links that it moves itself (inline moves), it
// can instead sleep in poll() on those links' sockets: the kernel wakes it
// when a message arrives, and until then its core goes to the others.
#pragma once

#include <poll.h>

#include <span>
#include <vector>

#include "plan/plan.h"

namespace chorus {

class LinkSleeper {
 public:
  // Sleeps for at most `timeoutUs` on the descriptors of the links that the
  // waiting lanes of `plans` wait on, and returns true. Returns false at once
  // (no sleep) when some lane waits on anything else (shared memory, a
  // finished plan waiting for its receivers), when a link cannot say what to
  // wait for, or when a link moved something while it was asked.
  bool sleep(std::span<Plan* const> plans, int64_t timeoutUs);

 private:
  std::vector<pollfd> fds_;
};

}  // namespace chorus
