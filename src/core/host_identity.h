// Who and where this process is, as compared between ranks.
#pragma once

#include <cstddef>
#include <cstdint>

namespace chorus {

// Equal for processes on the same node (host name + kernel boot id, or NCCL_HOSTID).
uint64_t hostHash();
// Equal for processes that share one kernel, and so its CPUs, whatever
// NCCL_HOSTID says: the kernel's boot id, which every network namespace and
// container on it reads alike (the host name where there is none). Ranks
// that are different "hosts" to the transports may still compete for cores.
uint64_t machineHash();
// Random per process; changes in a fork()ed child.
uint64_t processToken();
// 64-bit FNV-1a, for hashing names.
uint64_t hashBytes(const void* data, size_t bytes, uint64_t seed = 0xcbf29ce484222325ull);

}  // namespace chorus
