// reduce_perf: the root ends with the reduction of all inputs; other ranks'
// receive buffers are not checked. busbw = algbw.
#include "common/coll.h"

namespace chorus_bench {
namespace {

Layout layout(size_t count, size_t, int) { return {count, count, count, 0, 0}; }

double busFactor(int) { return 1.0; }

ncclResult_t launch(const LaunchArgs& a) {
  return ncclReduce(a.send, a.recv, a.count, a.type, a.op, a.root, a.comm, a.stream);
}

void expected(const Layout& l, int rank, int, int root, std::vector<Segment>* out) {
  if (rank == root) out->push_back({0, l.recvCount, true, 0, 0});
}

const CollSpec kSpec{.name = "Reduce",
                     .reduces = true,
                     .rooted = true,
                     .inPlaceChecked = true,
                     .layout = layout,
                     .busFactor = busFactor,
                     .launch = launch,
                     .expected = expected};

}  // namespace
}  // namespace chorus_bench

int main(int argc, char** argv) { return chorus_bench::benchMain(argc, argv, chorus_bench::kSpec); }
