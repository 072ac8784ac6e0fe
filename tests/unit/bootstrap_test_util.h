// Helpers shared by the bootstrap tests: forked children that report through
// their exit status, timing, and raw sockets for playing a misbehaving client.
// Everything here talks to loopback only.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>

#include "bootstrap/socket.h"
#include "bootstrap/store.h"

namespace chorus::testing {

// In a child: report the failed condition on stderr and make the child exit non-zero.
#define CHILD_CHECK(cond)                                                              \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      fprintf(stderr, "child %d: check failed at %s:%d: %s\n", getpid(), __FILE__, __LINE__, #cond); \
      return 1;                                                                        \
    }                                                                                  \
  } while (0)

// Forks a child that runs fn and _exit()s with its return value (skipping the
// parent's atexit handlers and gtest's teardown).
inline pid_t forkChild(const std::function<int()>& fn) {
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int rc = fn();
    fflush(nullptr);
    _exit(rc);
  }
  return pid;
}

// Exit status of the child, -SIGNAL if it died of a signal, -1000 if it was
// still running after timeoutMs (it is then killed).
inline int waitChild(pid_t pid, int timeoutMs = 15000) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    if (r < 0) return -2000;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1000;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

inline int64_t msSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

inline SockAddr loopback(uint16_t port) {
  SockAddr a;
  auto* sin = reinterpret_cast<sockaddr_in*>(&a.storage);
  sin->sin_family = AF_INET;
  sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sin->sin_port = htons(port);
  a.len = sizeof(sockaddr_in);
  return a;
}

// A loopback port that was free a moment ago.
inline uint16_t freeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  SockAddr a = loopback(0);
  bind(fd, a.sa(), a.len);
  socklen_t len = sizeof(a.storage);
  getsockname(fd, a.sa(), &len);
  close(fd);
  return a.port();
}

// A plain blocking socket connected to addr (-1 on failure).
inline int rawConnect(const SockAddr& addr) {
  int fd = socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, addr.sa(), addr.len) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

inline bool rawSend(int fd, const void* p, size_t n) {
  return send(fd, p, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
}

// Waits up to timeoutMs for the peer to close fd (reading and discarding data).
inline bool closedByPeerWithin(int fd, int timeoutMs) {
  auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  char buf[256];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 20) <= 0) continue;
    ssize_t r = recv(fd, buf, sizeof(buf), 0);
    if (r <= 0) return true;
  }
  return false;
}

}  // namespace chorus::testing
