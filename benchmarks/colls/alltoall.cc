// alltoall_perf: slice p of rank r's input lands in slice r of rank p's
// output. The size column is one rank's whole buffer; busbw = algbw * (n-1)/n
// since the slice a rank keeps for itself never crosses a link.
#include "common/coll.h"

namespace chorus_bench {
namespace {

Layout layout(size_t count, size_t elt, int n) {
  const size_t slice = alignedSlice(count, elt, n);
  return {slice * n, slice * n, slice, 0, 0};
}

double busFactor(int n) { return static_cast<double>(n - 1) / n; }

ncclResult_t launch(const LaunchArgs& a) { return ncclAlltoAll(a.send, a.recv, a.count, a.type, a.comm, a.stream); }

void expected(const Layout& l, int rank, int n, int, std::vector<Segment>* out) {
  for (int p = 0; p < n; ++p) out->push_back({p * l.paramCount, l.paramCount, false, p, rank * l.paramCount});
}

const CollSpec kSpec{.name = "AlltoAll",
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
