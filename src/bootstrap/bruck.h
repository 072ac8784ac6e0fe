// Bruck's all-gather over any message layer, written once for the mesh
// bootstrap's allGather and for the mailbox table at init. In round k a rank
// sends what it holds of ranks rank..rank+2^k-1 to rank-2^k and receives the
// next blocks from rank+2^k: ceil(log2(n)) rounds. `send(round, to, data)`
// delivers; `recv(round, from, &data)` waits for rank `from`'s message.
#pragma once

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/little_endian.h"
#include "core/result.h"

namespace chorus {

template <class Send, class Recv>
ncclResult_t bruckAllGather(int rank, int n, size_t bytes, const void* mine, void* all, Send&& send, Recv&& recv) {
  std::vector<uint8_t> have(static_cast<size_t>(n) * bytes);  // relative to this rank
  if (bytes != 0) memcpy(have.data(), mine, bytes);
  int got = 1;
  for (int round = 0; got < n; ++round) {
    const int cnt = std::min(got, n - got);
    const int to = (rank - got + n) % n, from = (rank + got) % n;
    std::vector<uint8_t> out(8 + static_cast<size_t>(cnt) * bytes);
    storeLittleEndian(out.data(), bytes, 8);
    if (bytes != 0) memcpy(out.data() + 8, have.data(), static_cast<size_t>(cnt) * bytes);
    CHORUS_CHECK(send(round, to, std::move(out)));
    std::vector<uint8_t> in;
    CHORUS_CHECK(recv(round, from, &in));
    const uint64_t theirs = in.size() >= 8 ? loadLittleEndian(in.data(), 8) : 0;
    if (in.size() != 8 + static_cast<size_t>(cnt) * bytes || theirs != bytes)
      return fail(ncclInvalidUsage, "bootstrap: allGather: rank %d contributed %llu bytes, rank %d expected %zu", from,
                  static_cast<unsigned long long>(theirs), rank, bytes);
    if (bytes != 0) memcpy(have.data() + static_cast<size_t>(got) * bytes, in.data() + 8, in.size() - 8);
    got += cnt;
  }
  auto* dst = static_cast<uint8_t*>(all);
  if (bytes != 0)
    for (int i = 0; i < n; ++i)  // `mine` was copied first, so aliasing our slot is harmless
      memcpy(dst + static_cast<size_t>((rank + i) % n) * bytes, have.data() + static_cast<size_t>(i) * bytes, bytes);
  return ncclSuccess;
}

}  // namespace chorus
