// all_reduce_perf: every rank ends with the reduction of all inputs.
// busbw = algbw * 2(n-1)/n: a ring sends and receives (n-1)/n of the data
// twice per rank, once while reducing and once while distributing.
#include "common/coll.h"

namespace chorus_bench {
namespace {

Layout layout(size_t count, size_t, int) { return {count, count, count, 0, 0}; }

double busFactor(int n) { return 2.0 * (n - 1) / n; }

ncclResult_t launch(const LaunchArgs& a) {
  if (a.reduce != nullptr) return chorusAllReduceEx(a.send, a.recv, a.count, a.type, a.op, a.reduce, a.comm, a.stream);
  return ncclAllReduce(a.send, a.recv, a.count, a.type, a.op, a.comm, a.stream);
}

void expected(const Layout& l, int, int, int, std::vector<Segment>* out) {
  out->push_back({0, l.recvCount, true, 0, 0});
}

const CollSpec kSpec{.name = "AllReduce",
                     .reduces = true,
                     .rooted = false,
                     .inPlaceChecked = true,
                     .layout = layout,
                     .busFactor = busFactor,
                     .launch = launch,
                     .expected = expected,
                     .takesReduceConfig = true};

}  // namespace
}  // namespace chorus_bench

int main(int argc, char** argv) { return chorus_bench::benchMain(argc, argv, chorus_bench::kSpec); }
