// all_gather_perf: every rank ends with every rank's slice, in rank order.
// The size column is the whole output; busbw = algbw * (n-1)/n because each
// rank receives all slices but its own.
#include "common/coll.h"

namespace chorus_bench {
namespace {

Layout layout(size_t count, size_t elt, int n) {
  const size_t slice = alignedSlice(count, elt, n);
  return {slice, slice * n, slice, slice, 0};
}

double busFactor(int n) { return static_cast<double>(n - 1) / n; }

ncclResult_t launch(const LaunchArgs& a) { return ncclAllGather(a.send, a.recv, a.count, a.type, a.comm, a.stream); }

void expected(const Layout& l, int, int n, int, std::vector<Segment>* out) {
  for (int p = 0; p < n; ++p) out->push_back({p * l.paramCount, l.paramCount, false, p, 0});
}

const CollSpec kSpec{.name = "AllGather",
                     .reduces = false,
                     .rooted = false,
                     .inPlaceChecked = true,
                     .layout = layout,
                     .busFactor = busFactor,
                     .launch = launch,
                     .expected = expected};

}  // namespace
}  // namespace chorus_bench

int main(int argc, char** argv) { return chorus_bench::benchMain(argc, argv, chorus_bench::kSpec); }
