#include "core/host_identity.h"

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <random>
#include <string>

#include "core/params.h"

namespace chorus {

uint64_t hashBytes(const void* data, size_t bytes, uint64_t seed) {
  uint64_t h = seed;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

namespace {

std::string hostName() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

std::string kernelBootId() {
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  return boot;
}

}  // namespace

uint64_t hostHash() {
  std::string id = params::hostId();
  if (id.empty()) id = hostName() + "|" + kernelBootId();
  return hashBytes(id.data(), id.size());
}

uint64_t machineHash() {
  std::string id = kernelBootId();
  if (id.empty()) id = "host:" + hostName();
  return hashBytes(id.data(), id.size());
}

uint64_t processToken() {
  static std::mutex mutex;
  static pid_t owner = 0;
  static uint64_t token = 0;
  std::lock_guard<std::mutex> lock(mutex);
  if (owner != getpid()) {
    std::random_device rd;
    token = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
    owner = getpid();
  }
  return token;
}

}  // namespace chorus
