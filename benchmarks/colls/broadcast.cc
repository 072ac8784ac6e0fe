// broadcast_perf: every rank ends with the root's buffer. busbw = algbw:
// a pipelined chain moves each byte over every link once.
#include "common/coll.h"

namespace chorus_bench {
namespace {

Layout layout(size_t count, size_t, int) { return {count, count, count, 0, 0}; }

double busFactor(int) { return 1.0; }

ncclResult_t launch(const LaunchArgs& a) {
  return ncclBroadcast(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
}

void expected(const Layout& l, int, int, int root, std::vector<Segment>* out) {
  out->push_back({0, l.recvCount, false, root, 0});
}

const CollSpec kSpec{.name = "Broadcast",
                     .reduces = false,
                     .rooted = true,
                     .inPlaceChecked = true,
                     .layout = layout,
                     .busFactor = busFactor,
                     .launch = launch,
                     .expected = expected};

}  // namespace
}  // namespace chorus_bench

int main(int argc, char** argv) { return chorus_bench::benchMain(argc, argv, chorus_bench::kSpec); }
