#include "wire/wire_plans.h"

#include <gtest/gtest.h>

#include <vector>

#include "common/task_builder.h"
#include "graph/search.h"
#include "graph/synthetic.h"

namespace chorus::test {

std::shared_ptr<const graph::CommGraph> hostsGraph(int nranks, int hosts, bool roundRobin) {
  std::vector<uint64_t> hashes;
  const int G = nranks / hosts;
  for (int r = 0; r < nranks; ++r) hashes.push_back(uint64_t(roundRobin ? r % hosts : r / G));
  auto g = std::make_shared<graph::CommGraph>();
  EXPECT_EQ(graph::searchGraph(graph::hostsFromHashes(hashes), graph::SearchOptions{}, g.get()), ncclSuccess);
  return g;
}

Task floatSumTask(size_t count) {
  static std::vector<float> in(size_t(1) << 20, 1.0f), out(in.size());
  EXPECT_LE(count, in.size());
  return makeTask(nullptr, CollType::AllReduce, ncclFloat32, sumOf(ncclFloat32), in.data(), out.data(), count);
}

}  // namespace chorus::test
