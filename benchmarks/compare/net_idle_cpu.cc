// CPU an idle communicator costs: each process initializes, runs a few
// all-reduces (connections set up, receives posted), then sits idle for
// IDLE_S seconds (default 10) and reports the CPU time the process used
// meanwhile (/proc/self/stat utime + stime: the proxy and backend threads,
// the main thread only sleeps). Start it with chorusrun, e.g. over the
// socket backend on loopback:
//   NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo build/bin/chorusrun -n 2 build/bin/net_idle_cpu
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/world.h"

namespace {

// utime + stime of this process, in clock ticks (fields 14 and 15).
long long cpuTicks() {
  std::ifstream f("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  long long utime = 0, stime = 0;
  // After "pid (comm) ": field 3 is state; utime is field 14.
  if (std::sscanf(stat.c_str() + close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lld %lld", &utime, &stime) !=
      2)
    return -1;
  return utime + stime;
}

bool ok(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return true;
  std::fprintf(stderr, "net_idle_cpu: %s: %s (%s)\n", what, ncclGetErrorString(r), ncclGetLastError(nullptr));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  chorus_bench::ProcessWorld world;
  if (!chorus_bench::worldInit(&argc, &argv, &world)) return 2;
  const char* env = std::getenv("IDLE_S");
  const int idleS = env != nullptr ? std::atoi(env) : 10;
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  if (!ok(chorus_bench::worldUniqueId(world, &id), "unique id") ||
      !ok(ncclCommInitRank(&comm, world.size, id, world.rank), "init"))
    return 1;
  std::vector<float> buf(1 << 16, 1.0f);
  for (size_t n : {size_t(1), size_t(1024), buf.size()})
    if (!ok(ncclAllReduce(buf.data(), buf.data(), n, ncclFloat, ncclSum, comm, nullptr), "all_reduce")) return 1;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the threads settle
  const long long t0 = cpuTicks();
  const auto w0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(idleS));
  const long long t1 = cpuTicks();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  const double share = static_cast<double>(t1 - t0) / static_cast<double>(sysconf(_SC_CLK_TCK)) / wall;
  std::printf("rank %d: idle communicator: %.2f%% of a core over %.1f s (%lld ticks)\n", world.rank, share * 100, wall,
              t1 - t0);
  ok(ncclAllReduce(buf.data(), buf.data(), 1, ncclFloat, ncclSum, comm, nullptr), "all_reduce after idling");
  ncclCommDestroy(comm);
  chorus_bench::worldFinalize();
  return 0;
}
