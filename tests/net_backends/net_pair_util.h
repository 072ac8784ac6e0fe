// Helpers for driving a chorusNet_v1_t backend from a test: connect one
// listen/connect/accept pair by polling both sides from one thread, and wait
// for requests with a deadline, so a broken backend fails instead of hanging.
#pragma once

#include <chrono>
#include <thread>
#include <vector>

#include "chorus/net_plugin.h"

namespace chorus::test {

struct NetPair {
  void* listenComm = nullptr;
  void* sendComm = nullptr;
  void* recvComm = nullptr;
};

inline std::chrono::steady_clock::time_point deadlineIn(int ms) {
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
}

// listen + connect + accept, alternating until both sides are up.
inline ncclResult_t connectPair(const chorusNet_v1_t* net, int dev, NetPair* pair, int timeoutMs = 10000) {
  char handle[CHORUS_NET_HANDLE_BYTES] = {};
  ncclResult_t res = net->listen(dev, handle, &pair->listenComm);
  if (res != ncclSuccess) return res;
  auto deadline = deadlineIn(timeoutMs);
  while (pair->sendComm == nullptr || pair->recvComm == nullptr) {
    if (pair->sendComm == nullptr && (res = net->connect(dev, handle, &pair->sendComm)) != ncclSuccess) return res;
    if (pair->recvComm == nullptr && (res = net->accept(pair->listenComm, &pair->recvComm)) != ncclSuccess) return res;
    if (std::chrono::steady_clock::now() > deadline) return ncclRemoteError;
  }
  return ncclSuccess;
}

inline void closePair(const chorusNet_v1_t* net, NetPair* pair) {
  if (pair->sendComm != nullptr) net->closeSend(pair->sendComm);
  if (pair->recvComm != nullptr) net->closeRecv(pair->recvComm);
  if (pair->listenComm != nullptr) net->closeListen(pair->listenComm);
  *pair = NetPair{};
}

// Tests every request until all are done (each entry is cleared when done;
// sizes[i] receives its size). Fails with the first error or ncclRemoteError
// at the deadline.
inline ncclResult_t waitAll(const chorusNet_v1_t* net, std::vector<void*>& reqs, std::vector<size_t>* sizes,
                            int timeoutMs = 20000) {
  if (sizes != nullptr) sizes->assign(reqs.size(), 0);
  auto deadline = deadlineIn(timeoutMs);
  size_t remaining = 0;
  for (void* r : reqs) remaining += r != nullptr;
  while (remaining > 0) {
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (reqs[i] == nullptr) continue;
      int done = 0;
      size_t size = 0;
      ncclResult_t res = net->test(reqs[i], &done, &size);
      if (res != ncclSuccess) return res;
      if (!done) continue;
      reqs[i] = nullptr;
      if (sizes != nullptr) (*sizes)[i] = size;
      --remaining;
    }
    if (std::chrono::steady_clock::now() > deadline) return ncclRemoteError;
  }
  return ncclSuccess;
}

// Posts with retry while the backend answers "not yet" (NULL request).
template <typename Post>
inline ncclResult_t postWithRetry(Post post, void** request, int timeoutMs = 10000) {
  auto deadline = deadlineIn(timeoutMs);
  for (;;) {
    ncclResult_t res = post(request);
    if (res != ncclSuccess || *request != nullptr) return res;
    if (std::chrono::steady_clock::now() > deadline) return ncclRemoteError;
    std::this_thread::yield();
  }
}

}  // namespace chorus::test
