// reduce_scatter_perf: rank r ends with slice r of the reduction of all
// inputs. The size column is the whole input; busbw = algbw * (n-1)/n.
#include "common/coll.h"

namespace chorus_bench {
namespace {

Layout layout(size_t count, size_t elt, int n) {
  const size_t slice = alignedSlice(count, elt, n);
  return {slice * n, slice, slice, 0, slice};
}

double busFactor(int n) { return static_cast<double>(n - 1) / n; }

ncclResult_t launch(const LaunchArgs& a) {
  if (a.reduce != nullptr)
    return chorusReduceScatterEx(a.send, a.recv, a.count, a.type, a.op, a.reduce, a.comm, a.stream);
  return ncclReduceScatter(a.send, a.recv, a.count, a.type, a.op, a.comm, a.stream);
}

void expected(const Layout& l, int rank, int, int, std::vector<Segment>* out) {
  out->push_back({0, l.paramCount, true, 0, rank * l.paramCount});
}

const CollSpec kSpec{.name = "ReduceScatter",
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
