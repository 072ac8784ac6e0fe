// A header's ABI reduced to a table of (key, value) facts: sizes, offsets,
// enumerator and macro values, initializer contents and function types.
//
// Our nccl.h and NVIDIA's share the include guard and every name, so they can
// never meet in one translation unit. Each facts_*.cc includes exactly one of
// them plus abi_facts.inc (the same generator for both), and the test compares
// the resulting tables. This header must therefore not include any nccl.h.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace chorus_abi {

using Facts = std::vector<std::pair<std::string, std::string>>;

// Our include/nccl.h (+ chorus/nccl_device_host.h), compiled without CUDA headers.
Facts oursFacts();
// Same, with the CUDA runtime headers visible (only built when CUDA is installed).
Facts oursFactsWithCuda();
// NVIDIA's nccl.h (+ nccl_device.h) from the CUDA toolkit (only built when present).
Facts nvidiaFacts();

}  // namespace chorus_abi

// The C translation unit's view of our header, as "key=value" lines.
extern "C" const char* chorus_abi_c_facts(void);
