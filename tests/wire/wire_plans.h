// What the plan tests of the direct reductions share: graphs that claim
// ranks sit on several hosts, and a float sum AllReduce task to plan.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "enqueue/task.h"
#include "graph/comm_graph.h"

namespace chorus::test {

// A graph, identical on every rank, claiming rank r sits on host r % hosts
// (`roundRobin`, as `--map-by node` deals them) or on host r / (nranks /
// hosts) (as `--map-by slot` does).
std::shared_ptr<const graph::CommGraph> hostsGraph(int nranks, int hosts, bool roundRobin);

// The direct reductions the GPU tests of the wire forms run (the
// translation, and the wire kernel on CPU threads): format 0 is
// deterministic; root -1 for unrooted calls.
struct WireCall {
  const char* name;
  CollType type;
  uint8_t format;  // a chorusWire_t
  int root;
  ncclDataType_t dtype = ncclFloat32;
};
inline constexpr WireCall kWireCalls[] = {
    {"Int8AllReduce", CollType::AllReduce, 3, -1},
    {"Bf16ReduceScatter", CollType::ReduceScatter, 1, -1},
    {"DetAllReduce", CollType::AllReduce, 0, -1},
    {"DetReduceScatter", CollType::ReduceScatter, 0, -1},
    {"DetReduceToRoot2", CollType::Reduce, 0, 2},
    {"DetHalfAllReduce", CollType::AllReduce, 0, -1, ncclFloat16},
    {"Fp8HalfAllReduce", CollType::AllReduce, 2, -1, ncclFloat16},
};

// The layouts they run on: 4 ranks on one host, and 4 "hosts" of 2 ranks
// (the two-level form and the chains).
using WireLayout = std::tuple<int, int>;  // ranks, hosts
inline const auto kWireLayouts = ::testing::Values(WireLayout{4, 1}, WireLayout{8, 4});

// A test name for (layout, index of kWireCalls).
inline std::string wireCaseName(const std::tuple<WireLayout, int>& c) {
  const WireLayout layout = std::get<0>(c);
  return std::to_string(std::get<0>(layout)) + "x" + std::to_string(std::get<1>(layout)) + "_" +
         kWireCalls[std::get<1>(c)].name;
}

// A float sum AllReduce of `count` elements (at most 1 << 16) between
// buffers that live as long as the process; set its wire spec before planning.
Task floatSumTask(size_t count);

}  // namespace chorus::test
