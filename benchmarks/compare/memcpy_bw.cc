// Single-thread memcpy bandwidth at 256 MiB (or -s bytes): the ceiling one
// core's copy loop reaches on this machine, used by run_compare.sh to put
// all-reduce bus bandwidths in proportion.
//
//   memcpy_bw [-s 256M] [-n 10]
//
// Prints the best and median copy rate (bytes copied per second, not read +
// written), the last line as "memcpy_GBps <median>" for scripts.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "compare/sweep.h"

int main(int argc, char** argv) {
  size_t bytes = size_t{256} << 20;
  int reps = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "-s" && compare::parseBytes(argv[i + 1], &bytes)) continue;
    if (flag == "-n" && (reps = std::atoi(argv[i + 1])) > 0) continue;
    std::fprintf(stderr, "usage: memcpy_bw [-s bytes] [-n reps]\n");
    return 2;
  }
  if (argc % 2 == 0 || bytes == 0) {
    std::fprintf(stderr, "usage: memcpy_bw [-s bytes] [-n reps]\n");
    return 2;
  }
  auto* src = static_cast<char*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
  auto* dst = static_cast<char*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
  if (!src || !dst) {
    std::fprintf(stderr, "memcpy_bw: cannot allocate 2 x %zu bytes\n", bytes);
    return 1;
  }
  // Fault every page in and warm the copy path before timing.
  std::memset(src, 1, bytes);
  std::memset(dst, 0, bytes);
  std::memcpy(dst, src, bytes);
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    std::memcpy(dst, src, bytes);
    const std::chrono::duration<double> s = std::chrono::steady_clock::now() - start;
    rates.push_back(static_cast<double>(bytes) / 1e9 / s.count());
    src[r % bytes] = static_cast<char>(dst[(r * 4099) % bytes] + 1);  // keep the copies observable
  }
  std::sort(rates.begin(), rates.end());
  const double median = rates[rates.size() / 2];
  std::printf("# memcpy %zu bytes, %d reps, one thread: best %.2f GB/s, median %.2f GB/s\n", bytes, reps, rates.back(),
              median);
  std::printf("memcpy_GBps %.3f\n", median);
  std::free(src);
  std::free(dst);
  return 0;
}
