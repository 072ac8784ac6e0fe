// sendrecv_perf: every rank sends its buffer to the next rank and receives
// the previous rank's, a ring of point-to-point transfers. busbw = algbw.
#include "common/coll.h"

namespace chorus_bench {
namespace {

Layout layout(size_t count, size_t, int) { return {count, count, count, 0, 0}; }

double busFactor(int) { return 1.0; }

ncclResult_t launch(const LaunchArgs& a) {
  const int next = (a.rank + 1) % a.nranks;
  const int prev = (a.rank + a.nranks - 1) % a.nranks;
  ncclResult_t res = ncclGroupStart();
  if (res != ncclSuccess) return res;
  res = ncclSend(a.send, a.count, a.type, next, a.comm, a.stream);
  if (res == ncclSuccess) res = ncclRecv(a.recv, a.count, a.type, prev, a.comm, a.stream);
  const ncclResult_t end = ncclGroupEnd();  // always close the group we opened
  return res != ncclSuccess ? res : end;
}

void expected(const Layout& l, int rank, int n, int, std::vector<Segment>* out) {
  out->push_back({0, l.recvCount, false, (rank + n - 1) % n, 0});
}

const CollSpec kSpec{.name = "SendRecv",
                     .reduces = false,
                     .rooted = false,
                     .inPlaceChecked = false,
                     .layout = layout,
                     .busFactor = busFactor,
                     .launch = launch,
                     .expected = expected};

}  // namespace
}  // namespace chorus_bench

int main(int argc, char** argv) { return chorus_bench::benchMain(argc, argv, chorus_bench::kSpec); }
